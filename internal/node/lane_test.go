package node_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/goredis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stall is a Laned operation whose reply is held until release is closed:
// its lane's worker is busy with it until then.
type stall struct {
	lane    string
	decoded chan struct{}
	release chan struct{}
}

func (*stall) Name() string   { return "stall" }
func (o *stall) Lane() string { return o.lane }
func (*stall) Encode(_ node.Layout, cmds []node.Cmd) []node.Cmd {
	return append(cmds, node.Cmd{Args: []any{"ping"}})
}
func (o *stall) Decode([]node.Cmd) node.Reply {
	close(o.decoded)
	<-o.release
	return node.Reply{OK: true}
}

// otherLane returns a name whose lane differs from name's.
func otherLane(t *testing.T, name string) string {
	t.Helper()
	for _, other := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if node.LaneIndex(&node.Release{Key: other}, 0) != node.LaneIndex(&node.Release{Key: name}, 0) {
			return other
		}
	}
	t.Fatal("every name in one lane")
	return ""
}

// sendTo returns what hands an operation to n, with a channel of its reply.
func sendTo(t *testing.T, n *node.Redis) func(node.Op) chan node.Reply {
	t.Helper()
	return func(op node.Op) chan node.Reply {
		done := make(chan node.Reply, 1)
		n.Do(t.Context(), time.Now().Add(time.Minute), op, func(r node.Reply) { done <- r })
		return done
	}
}

// newStall returns a stall in lane.
func newStall(lane string) *stall {
	return &stall{lane: lane, decoded: make(chan struct{}), release: make(chan struct{})}
}

// unstall lets st (its reply due on done) return, then checks that the
// operation held back behind it was applied (its reply due on behind).
func unstall(t *testing.T, st *stall, done, behind chan node.Reply) {
	t.Helper()
	close(st.release)
	<-done
	r := <-behind
	require.NoError(t, r.Err)
	assert.True(t, r.OK)
}

// A name's operations are applied in the order they were handed over: a
// release handed over while an earlier operation of the name is still in
// its round trip waits for it, even though another lane is free; an
// operation of a name in the other lane does not wait.
func TestLaneKeepsANamesOrder(t *testing.T) {
	s := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	n := goredis.NewNode(c)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	other := otherLane(t, "k")
	require.NoError(t, s.Set("k", "t1"))
	require.NoError(t, s.Set(other, "t1"))

	do := sendTo(t, n)
	first := newStall("k")
	firstDone := do(first)
	<-first.decoded // the lane of "k" is busy until first.release closes

	select {
	case r := <-do(&node.Release{Key: other, Token: "t1"}):
		require.NoError(t, r.Err)
		assert.True(t, r.OK, "the other lane's release")
	case <-time.After(10 * time.Second):
		t.Fatal("a name in the other lane waited for a busy lane")
	}

	released := do(&node.Release{Key: "k", Token: "t1"})
	time.Sleep(50 * time.Millisecond)
	assert.True(t, s.Exists("k"), "a release of k was applied before the earlier operation of k had returned")
	unstall(t, first, firstDone, released)
	assert.False(t, s.Exists("k"))
}

// Every operation of one name takes the same lane, whatever its kind.
func TestLaneIsTheNames(t *testing.T) {
	for _, name := range []string{"a", "b", "orders:7", "{x}:y"} {
		want := node.LaneIndex(&node.Acquire{Key: name}, 0)
		for _, op := range []node.Op{&node.Release{Key: name}, &node.Extend{Key: name}, &node.Fence{Key: name}, &node.Inspect{Key: name},
			&node.Release{Shape: node.Any, Key: name}, &node.Acquire{Shape: node.Semaphore, Key: name}, &node.Release{Shape: node.Semaphore, Key: name}, &node.Extend{Shape: node.Semaphore, Key: name},
			&node.Acquire{Shape: node.Read, Key: name}, &node.Release{Shape: node.Read, Key: name}, &node.Extend{Shape: node.Read, Key: name}} {
			assert.Equal(t, want, node.LaneIndex(op, 7), "%s of %q", op.Name(), name)
		}
	}
}

// sharedStall is a stall that is node.Concurrent, as a reader's operation is.
type sharedStall struct{ stall }

func (*sharedStall) Concurrent() (string, bool) { return "stall", true }

// Readers' operations of one name leave while only other readers'
// operations of the name are in flight, and nothing else does: a release
// of the name, or the stalled reader's own release, waits for them, and a
// reader's grant waits for a release in flight.
func TestLaneLetsReadersPass(t *testing.T) {
	s := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	n := goredis.NewNode(c)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	require.NoError(t, s.Set("k", "t1"))
	do := sendTo(t, n)

	reader := &sharedStall{*newStall("k")}
	readerDone := do(reader)
	<-reader.decoded // one worker is busy with a reader's operation of k
	select {
	case <-do(&node.Release{Shape: node.Read, Key: "k", Token: "r"}): // answered (k holds a plain lock: refused)
	case <-time.After(10 * time.Second):
		close(reader.release)
		t.Fatal("a reader's operation waited for another reader's")
	}
	own := do(&node.Release{Shape: node.Read, Key: "k", Token: "stall"}) // the stalled holder's own
	released := do(&node.Release{Key: "k", Token: "t1"})
	time.Sleep(50 * time.Millisecond)
	assert.True(t, s.Exists("k"), "a release went while a reader's operation of its name was in flight")
	passed := false
	select {
	case <-own:
		passed = true
	default:
	}
	close(reader.release)
	<-readerDone
	if !passed {
		<-own
	}
	assert.False(t, passed, "a reader's operation passed one of its own in flight")
	require.True(t, (<-released).OK)

	writer := newStall("k")
	writerDone := do(writer)
	<-writer.decoded
	read := do(&node.Acquire{Shape: node.Read, Key: "k", Token: "r", TTL: time.Minute})
	time.Sleep(50 * time.Millisecond)
	assert.False(t, s.Exists("k"), "a reader's grant went while another operation of its name was in flight")
	unstall(t, writer, writerDone, read)
}

// noScriptLoad refuses SCRIPT LOAD: the node never learns that it holds
// every script, and each runs first as an EVALSHA answered NOSCRIPT.
type noScriptLoad struct{}

func (noScriptLoad) DialHook(next redis.DialHook) redis.DialHook { return next }
func (noScriptLoad) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "script" {
			cmd.SetErr(errors.New("ERR refused by the test"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}
func (noScriptLoad) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "script" {
			for _, cmd := range cmds {
				cmd.SetErr(errors.New("ERR refused by the test"))
			}
			return cmds[0].Err()
		}
		return next(ctx, cmds)
	}
}

// A release and the re-lock that follows it, sent in one batch while the
// node may lack the release's script, are applied in that order: the
// release goes as EVAL, not as an EVALSHA that NOSCRIPT would send again
// after the re-lock had been refused (the key then deleted: a node lost
// to the lock, seen in one integration run of 300 re-locks in 20).
func TestLaneKeepsOrderWhileScriptsLoad(t *testing.T) {
	s := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	c.AddHook(noScriptLoad{})
	t.Cleanup(func() { _ = c.Close() })
	n := goredis.NewNode(c)
	n.SetWay(node.Scripts)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	do := sendTo(t, n)

	// The acquisition's script is in the node's cache (its EVAL loaded
	// it), the release's is not.
	r := <-do(&node.Acquire{Key: "k", Token: "t0", TTL: time.Minute})
	require.NoError(t, r.Err)
	require.True(t, r.OK)
	require.False(t, n.ScriptsCached())

	first := newStall("k")
	firstDone := do(first)
	<-first.decoded // what follows waits, and leaves in one batch
	released := do(&node.Release{Key: "k", Token: "t0"})
	relocked := do(&node.Acquire{Key: "k", Token: "t1", TTL: time.Minute})
	close(first.release)
	<-firstDone
	rel := <-released
	require.NoError(t, rel.Err)
	assert.True(t, rel.OK, "the release")
	re := <-relocked
	require.NoError(t, re.Err)
	assert.True(t, re.OK, "the re-lock, after the release: %+v", re)
	got, err := s.Get("k")
	require.NoError(t, err)
	assert.Equal(t, "t1", got)
}
