package sim

import (
	"context"
	"runtime"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	// go-redis logs each failed dial to a node the nemesis killed.
	redis.SetLogger(quiet{})
	// One thread runs Go code: with more, goroutines ready at one fake
	// instant run side by side in an order no seed fixes, and a replay
	// of a seed would not be the same run (TestReplay). The bubble keeps
	// one core busy at most anyway.
	runtime.GOMAXPROCS(1)
	m.Run()
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// raceEnabled says that the test runs under the race detector (see
// race_test.go): a replay command says so too.
var raceEnabled bool
