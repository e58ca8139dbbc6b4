package node_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/goredis"
	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/internal/scripts"
)

// recorder is a transport that writes down each script it runs (EVAL, or
// EVALSHA and the digest) and each TIME.
type recorder struct {
	*goredis.Transport
	mu   sync.Mutex
	sent []string
	// tamper, when set, answers each extend_many.lua in the server's
	// stead: the script is not sent.
	tamper func(c *node.Cmd)
}

func (r *recorder) note(cmds []*node.Cmd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cmds {
		switch s := c.Name(); s {
		case "evalsha":
			r.sent = append(r.sent, s+" "+fmt.Sprint(c.Args[1]))
		case "eval", "time":
			r.sent = append(r.sent, s)
		}
	}
}

func (r *recorder) Batch(ctx context.Context, cmds []*node.Cmd) error {
	r.note(cmds)
	if r.tamper == nil {
		return r.Transport.Batch(ctx, cmds)
	}
	var rest []*node.Cmd
	for _, c := range cmds {
		if c.Name() == "evalsha" && c.Args[1] == scripts.ExtendMany.Hash {
			r.tamper(c)
		} else {
			rest = append(rest, c)
		}
	}
	return r.Transport.Batch(ctx, rest)
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

// recorded is a node over a new miniredis, whose scripts it is known to
// hold, and the recorder of what it sends.
func recorded(t *testing.T) (*miniredis.Miniredis, *node.Redis, *recorder) {
	t.Helper()
	servers, clients := goredistest.Miniredis(t, 1)
	rec := &recorder{Transport: goredis.New(clients[0], time.Now)}
	n := node.NewOver(rec, node.Config{})
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	n.DoTogether(context.Background(), &node.Inspect{Key: "warm-up"}) // the workers start and load the scripts
	require.Eventually(t, n.ScriptsCached, 5*time.Second, time.Millisecond)
	rec.take()
	return servers[0], n, rec
}

// extendA is a plain extension of k by token "a", for 7 s.
func extendA(k string) node.Op { return &node.Extend{Key: k, Token: "a", TTL: 7 * time.Second} }

// many is how the recorder writes down a run.
var many = "evalsha " + scripts.ExtendMany.Hash

// alone is how the recorder writes down an extension sent alone.
var aloneExt = "evalsha " + scripts.Extend.Hash

// TestExtensionsGoTogether: plain extensions sent together leave as one
// extend_many.lua, and each answers as it does alone (the conformance
// suite's coalesced side checks the answers case by case); a node that
// lost its scripts answers them all the same, through extend.lua alone,
// sent as EVAL.
func TestExtensionsGoTogether(t *testing.T) {
	s, n, rec := recorded(t)
	ctx := context.Background()
	require.NoError(t, s.Set("own", "a"))
	require.NoError(t, s.Set("own2", "a"))
	require.NoError(t, s.Set("other", "b"))
	_, err := s.Lpush("list", "x")
	require.NoError(t, err)
	ops := []node.Op{extendA("own"), extendA("other"), extendA("absent"), extendA("list"), extendA("own2")}
	want := []bool{true, false, false, false, true}
	for _, flush := range []bool{false, true} {
		if flush {
			flushed := node.NewCmd("script", "flush")
			rec.Transport.Send(ctx, flushed)
			require.NoError(t, flushed.Err())
		}
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
		if !flush {
			assert.Equal(t, []string{many, "time"}, sent, "five extensions in one script call, and the node's time")
		} else {
			assert.Equal(t, []string{many, "time", "eval", "eval", "eval", "eval", "eval", "time"}, sent,
				"the run, refused NOSCRIPT, then each alone as EVAL, and the node's time after them")
		}
		s.SetTTL("own", time.Second)
		s.SetTTL("own2", time.Second)
	}
}

// TestRunsFallBackAlone: what a run's reply cannot say, its extensions
// say alone. An element the script could not judge (-1: GET failed) sends
// that extension alone; an error reply sends them all, and the node makes
// no run for a while (runPause).
func TestRunsFallBackAlone(t *testing.T) {
	s, n, rec := recorded(t)
	ctx := context.Background()
	for _, k := range []string{"a1", "a2", "a3"} {
		require.NoError(t, s.Set(k, "a"))
	}
	ops := []node.Op{extendA("a1"), extendA("a2"), extendA("a3")}
	check := func(what string, sent ...string) {
		t.Helper()
		for i, r := range n.DoTogether(ctx, ops...) {
			require.NoError(t, r.Err, "%s: op %d", what, i)
			assert.True(t, r.OK, "%s: op %d", what, i)
		}
		assert.Equal(t, sent, rec.take(), what)
	}
	rec.tamper = func(c *node.Cmd) { c.Answer([]any{int64(1), int64(-1), int64(1)}, nil) }
	check("one key's GET failed", many, "time", aloneExt, "time")
	rec.tamper = func(c *node.Cmd) {
		c.Answer(nil, node.ServerError("NOPERM this user has no permissions to access one of the keys used as arguments"))
	}
	check("the run refused", many, "time", aloneExt, aloneExt, aloneExt, "time")
	rec.tamper = nil
	check("no run after a refusal", aloneExt, aloneExt, aloneExt, "time")
}

// TestRunsKeepTheOrderOfAName: an extension that a later call of its
// batch on the same name must follow is left out of the run, which may go
// again alone after that call: here the run is refused, and the
// inspection of k, after k's extension, must see it.
func TestRunsKeepTheOrderOfAName(t *testing.T) {
	s, n, rec := recorded(t)
	ctx := context.Background()
	for _, k := range []string{"k", "k2", "k3"} {
		require.NoError(t, s.Set(k, "a"))
		s.SetTTL(k, time.Second)
	}
	rec.tamper = func(c *node.Cmd) {
		c.Answer(nil, node.ServerError("NOPERM this user has no permissions to access one of the keys used as arguments"))
	}
	reps := n.DoTogether(ctx, extendA("k2"), extendA("k3"), extendA("k"), &node.Inspect{Key: "k"})
	for i, r := range reps[:3] {
		require.NoError(t, r.Err, "op %d", i)
		assert.True(t, r.OK, "op %d", i)
	}
	st, ok := reps[3].Value.(node.KeyState)
	require.True(t, ok, "%+v", reps[3])
	assert.Equal(t, 7*time.Second, st.TTL.Round(time.Second), "the inspection after the extension sees it")
	sent := rec.take()
	assert.Equal(t, []string{many, aloneExt}, sent[:2], "k2 and k3 in a run, k alone before its inspection")
}
