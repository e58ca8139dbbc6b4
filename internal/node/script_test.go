package node

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/scripts"
)

// A script the node answered NOSCRIPT runs again as EVAL, and the WAIT
// that followed it is sent again after the EVAL: the first WAIT ran when
// nothing had been written, and its count (here a stale 1, where
// miniredis, which has no replicas, answers 0) vouches for nothing.
func TestReloadSendsWaitAfterTheEval(t *testing.T) {
	s := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	evalsha := script(ctx, scripts.AcquirePlain, []string{"k"}, "t1", 1000, "0")
	evalsha.SetErr(serverError("NOSCRIPT No matching script. Please use EVAL."))
	wait := redis.NewIntCmd(ctx, "wait", 1, 20)
	wait.SetVal(1)
	cmds := []redis.Cmder{evalsha, wait}

	reload(ctx, c, cmds)
	require.NoError(t, cmds[0].Err(), "the EVAL ran")
	v, _ := s.Get("k")
	assert.Equal(t, "t1", v)
	require.NotSame(t, wait, cmds[1], "the WAIT was sent again")
	n, err := cmds[1].(*redis.IntCmd).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the count of the WAIT after the EVAL")

	alone := redis.NewIntCmd(ctx, "wait", 1, 20)
	alone.SetVal(1)
	plain := []redis.Cmder{alone}
	reload(ctx, c, plain)
	assert.Same(t, alone, plain[0], "no script to reload: nothing is sent")
	assert.Equal(t, int64(1), alone.Val())
}

// serverError is an error as a server sends it (a redis.Error).
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}
