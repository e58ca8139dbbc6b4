package goredis

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A refused dial ends the guarded calls that were in flight when it began,
// not a call guarded after it: a refusal told late (its dialling goroutine
// ran late, on a busy machine) must not fail a call to a server that came up
// meanwhile (TestRedisNodeLastDialFailure/refused,_then_up failed so in CI).
func TestRefusalEndsOnlyCallsItCouldFail(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	g := New(c, time.Now)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	var told []error
	g.Listen(func(err error) { told = append(told, err) }, done)

	refused := &node.DialFailure{Err: syscall.ECONNREFUSED, At: time.Now()}
	stale := g.dials.started.Add(1) // a dial begins, and is refused
	later, endLater := g.Guard(context.Background())
	t.Cleanup(endLater)
	g.dials.refused(stale, refused) // told after the call was guarded
	assert.NoError(t, later.Err(), "a dial begun before the call is not the call's")
	assert.Len(t, told, 1, "the listener hears it all the same")

	own := g.dials.started.Add(1) // the call's own dial
	g.dials.refused(own, refused)
	require.Error(t, later.Err())
	assert.True(t, errors.Is(context.Cause(later), syscall.ECONNREFUSED), "%v", context.Cause(later))
	assert.Len(t, told, 2)
}
