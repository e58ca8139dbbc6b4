package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/goredis"
	"github.com/redlock-go/redlock/internal/scripts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	evalsha := node.Cmd{Args: node.EvalArgs(scripts.AcquirePlain, []string{"k"}, "t1", 1000, "0")}
	evalsha.Answer(nil, node.ServerError("NOSCRIPT No matching script. Please use EVAL."))
	wait := node.Cmd{Args: []any{"wait", 1, 20}}
	wait.Answer(int64(1), nil)
	cmds := []node.Cmd{evalsha, wait}

	node.Reload(ctx, goredis.New(c, time.Now), cmds)
	require.NoError(t, cmds[0].Err(), "the EVAL ran")
	assert.Equal(t, "eval", cmds[0].Name())
	v, _ := s.Get("k")
	assert.Equal(t, "t1", v)
	n, err := cmds[1].Int()
	require.NoError(t, err)
	assert.Zero(t, n, "the count of the WAIT after the EVAL: it was sent again")

	alone := node.Cmd{Args: []any{"wait", 1, 20}}
	alone.Answer(int64(1), nil)
	plain := []node.Cmd{alone}
	node.Reload(ctx, goredis.New(c, time.Now), plain)
	assert.Equal(t, int64(1), plain[0].Num(), "no script to reload: nothing is sent")
}
