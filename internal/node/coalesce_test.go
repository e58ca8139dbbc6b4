package node_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/goredis"
	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/internal/scripts"
)

// recorder is a transport that writes down each script it runs: EVAL, or
// EVALSHA and the digest.
type recorder struct {
	*goredis.Transport
	mu   sync.Mutex
	sent []string
}

func (r *recorder) note(cmds []*node.Cmd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cmds {
		switch s := c.Name(); s {
		case "evalsha":
			r.sent = append(r.sent, s+" "+fmt.Sprint(c.Args[1]))
		case "eval":
			r.sent = append(r.sent, s)
		}
	}
}

func (r *recorder) Batch(ctx context.Context, cmds []*node.Cmd) error {
	r.note(cmds)
	return r.Transport.Batch(ctx, cmds)
}

func (r *recorder) Send(ctx context.Context, cmds ...*node.Cmd) {
	r.note(cmds)
	r.Transport.Send(ctx, cmds...)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sent
	r.sent = nil
	return out
}

// TestExtensionsGoTogether: plain extensions sent together leave as one
// extend_many.lua, and each answers as it does alone (the conformance
// suite's coalesced side checks the answers case by case); a node that
// lost its scripts answers them all the same, through extend.lua alone.
func TestExtensionsGoTogether(t *testing.T) {
	servers, clients := goredistest.Miniredis(t, 1)
	s := servers[0]
	rec := &recorder{Transport: goredis.New(clients[0], time.Now)}
	n := node.NewOver(rec, node.Config{})
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	ctx := context.Background()
	require.NoError(t, s.Set("own", "a"))
	require.NoError(t, s.Set("own2", "a"))
	require.NoError(t, s.Set("other", "b"))
	_, err := s.Lpush("list", "x")
	require.NoError(t, err)
	ext := func(k string) node.Op { return &node.Extend{Key: k, Token: "a", TTL: 7 * time.Second} }
	ops := []node.Op{ext("own"), ext("other"), ext("absent"), ext("list"), ext("own2")}
	want := []bool{true, false, false, false, true}
	for _, flush := range []bool{false, true} {
		if flush {
			_, err := clients[0].ScriptFlush(ctx).Result()
			require.NoError(t, err)
		}
		n.DoTogether(ctx, &node.Inspect{Key: "warm-up"}) // the workers start and load the scripts
		if !flush {
			require.Eventually(t, n.ScriptsCached, 5*time.Second, time.Millisecond)
		}
		rec.take()
		reps := n.DoTogether(ctx, ops...)
		for i, r := range reps {
			require.NoError(t, r.Err, "op %d", i)
			assert.Equal(t, want[i], r.OK, "op %d (flushed %v)", i, flush)
		}
		assert.Equal(t, 7*time.Second, s.TTL("own"))
		assert.Equal(t, 7*time.Second, s.TTL("own2"))
		assert.Equal(t, time.Duration(0), s.TTL("other"), "another's lock is not extended")
		assert.False(t, s.Exists("absent"), "an extension creates nothing")
		sent := rec.take()
		many := "evalsha " + scripts.ExtendMany.Hash
		if !flush {
			assert.Equal(t, []string{many}, sent, "five extensions in one script call")
		} else {
			assert.Equal(t, many, sent[0], "the run goes as one script call first")
			assert.NotContains(t, sent[1:], many, "then each alone")
		}
		s.SetTTL("own", time.Second)
		s.SetTTL("own2", time.Second)
	}
}
