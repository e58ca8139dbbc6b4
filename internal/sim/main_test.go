package sim

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	// go-redis logs each failed dial to a node the nemesis killed.
	redis.SetLogger(quiet{})
	m.Run()
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
