package node_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
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
	var rest []*node.Cmd
	for _, c := range cmds {
		if r.tamper != nil && c.Name() == "evalsha" && c.Args[1] == scripts.ExtendMany.Hash {
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
	do(t, n, &node.Inspect{Key: "warm-up"}) // the workers start and load the scripts
	require.Eventually(t, n.ScriptsCached, 5*time.Second, time.Millisecond)
	rec.take()
	return servers[0], n, rec
}

// do sends op to n and returns its reply.
func do(t *testing.T, n node.Node, op node.Op) node.Reply {
	t.Helper()
	ch := make(chan node.Reply, 1)
	n.Do(context.Background(), time.Now().Add(time.Minute), op, func(r node.Reply) { ch <- r })
	return <-ch
}

// extensionsA are plain extensions of keys by token "a", for 7 s.
func extensionsA(keys ...string) *node.Extensions {
	o := &node.Extensions{}
	for _, k := range keys {
		o.Each = append(o.Each, &node.Extend{Key: k, Token: "a", TTL: 7 * time.Second})
	}
	return o
}

var (
	many     = "evalsha " + scripts.ExtendMany.Hash // extend_many.lua, as the recorder writes it
	aloneExt = "evalsha " + scripts.Extend.Hash     // extend.lua
)

// answers returns the replies of Extensions' rep, each OK or not.
func answers(t *testing.T, rep node.Reply) []bool {
	t.Helper()
	require.NoError(t, rep.Err)
	each, ok := rep.Value.([]node.Reply)
	require.True(t, ok, "%+v", rep)
	out := make([]bool, len(each))
	for i, r := range each {
		require.NoError(t, r.Err, "extension %d", i)
		out[i] = r.OK
	}
	return out
}

// Extensions leave as one extend_many.lua and the node's time, each
// answered as alone (the conformance suite's Together sides check the
// answers case by case); a node that lost its scripts runs it as EVAL.
func TestExtensionsGoAsOneScriptCall(t *testing.T) {
	s, n, rec := recorded(t)
	require.NoError(t, s.Set("own", "a"))
	require.NoError(t, s.Set("own2", "a"))
	require.NoError(t, s.Set("other", "b"))
	_, err := s.Lpush("list", "x")
	require.NoError(t, err)
	for _, flush := range []bool{false, true} {
		if flush {
			flushed := node.NewCmd("script", "flush")
			rec.Transport.Send(context.Background(), flushed)
			require.NoError(t, flushed.Err())
		}
		rep := do(t, n, extensionsA("own", "other", "absent", "list", "own2"))
		assert.Equal(t, []bool{true, false, false, false, true}, answers(t, rep), "flushed %v", flush)
		assert.False(t, rep.Time.IsZero(), "the node's time")
		assert.Equal(t, 7*time.Second, s.TTL("own"))
		assert.Equal(t, 7*time.Second, s.TTL("own2"))
		assert.Equal(t, time.Duration(0), s.TTL("other"), "another's lock is not extended")
		assert.False(t, s.Exists("absent"), "an extension creates nothing")
		want := []string{many, "time"}
		if flush {
			want = append(want, "eval") // NOSCRIPT: again as EVAL
		}
		assert.Equal(t, want, rec.take())
		s.SetTTL("own", time.Second)
		s.SetTTL("own2", time.Second)
	}
}

// What the script's reply cannot say, each extension says alone: an
// element it could not judge (-1: GET failed) sends that extension alone;
// an error reply (a key the ACL denies) sends each alone, so that one
// denied key fails only its own extension.
func TestExtensionsFallBackAlone(t *testing.T) {
	s, n, rec := recorded(t)
	for _, k := range []string{"a1", "a2", "a3"} {
		require.NoError(t, s.Set(k, "a"))
	}
	rec.tamper = func(c *node.Cmd) { c.Answer([]any{int64(1), int64(-1), int64(1)}, nil) }
	assert.Equal(t, []bool{true, true, true}, answers(t, do(t, n, extensionsA("a1", "a2", "a3"))), "one key's GET failed")
	assert.Equal(t, []string{many, "time", aloneExt, "time"}, rec.take())
	rec.tamper = func(c *node.Cmd) {
		c.Answer(nil, node.ServerError("NOPERM this user has no permissions to access one of the keys used as arguments"))
	}
	assert.Equal(t, []bool{true, true, true}, answers(t, do(t, n, extensionsA("a1", "a2", "a3"))), "the script refused")
	sent := rec.take()
	assert.Equal(t, []string{many, "time"}, sent[:2])
	assert.ElementsMatch(t, []string{aloneExt, aloneExt, aloneExt}, without(sent[2:], "time"), "each alone")
}

// without returns s without its elements equal to x.
func without(s []string, x string) []string {
	var out []string
	for _, e := range s {
		if e != x {
			out = append(out, e)
		}
	}
	return out
}

// A node that refuses scripts, whose first request is extensions
// together, sends each again as its own call without scripts (each its
// own transaction, side by side by name), each answered as alone.
func TestExtensionsRefusedScriptsGoEachAlone(t *testing.T) {
	for _, lua := range []bool{true, false} {
		servers, clients := goredistest.Miniredis(t, 1)
		c := clients[0].(*redis.Client)
		if lua {
			goredistest.RefuseScripts(c)
		} else {
			goredistest.NoLua(c)
		}
		n := goredis.NewNode(c)
		t.Cleanup(func() { _ = n.Close(context.Background()) })
		require.NoError(t, servers[0].Set("own", "a"))
		require.NoError(t, servers[0].Set("other", "b"))
		rep := do(t, n, extensionsA("own", "other", "absent"))
		assert.Equal(t, []bool{true, false, false}, answers(t, rep), "refused with Lua %v", lua)
		assert.Equal(t, 7*time.Second, servers[0].TTL("own"))
		assert.NotEqual(t, node.Scripts, n.Way(), "switched off scripts")
	}
}
