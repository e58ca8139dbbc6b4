package node

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
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
func (*stall) Encode(ctx context.Context, _ Layout, cmds []redis.Cmder) []redis.Cmder {
	return append(cmds, redis.NewStatusCmd(ctx, "ping"))
}
func (o *stall) Decode([]redis.Cmder) Reply {
	close(o.decoded)
	<-o.release
	return Reply{OK: true}
}

// otherLane returns a name whose lane differs from name's.
func otherLane(t *testing.T, name string) string {
	t.Helper()
	for _, other := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if laneOf(&Release{Key: other}, 0) != laneOf(&Release{Key: name}, 0) {
			return other
		}
	}
	t.Fatal("every name in one lane")
	return ""
}

// sendTo returns what hands an operation to n, with a channel of its reply.
func sendTo(t *testing.T, n *Redis) func(Op) chan Reply {
	t.Helper()
	return func(op Op) chan Reply {
		done := make(chan Reply, 1)
		n.Do(t.Context(), time.Now().Add(time.Minute), op, func(r Reply) { done <- r })
		return done
	}
}

// newStall returns a stall in lane.
func newStall(lane string) *stall {
	return &stall{lane: lane, decoded: make(chan struct{}), release: make(chan struct{})}
}

// unstall lets st (its reply due on done) return, then checks that the
// operation held back behind it was applied (its reply due on behind).
func unstall(t *testing.T, st *stall, done, behind chan Reply) {
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
	n := NewRedis(c)
	t.Cleanup(n.Close)
	other := otherLane(t, "k")
	require.NoError(t, s.Set("k", "t1"))
	require.NoError(t, s.Set(other, "t1"))

	do := sendTo(t, n)
	first := newStall("k")
	firstDone := do(first)
	<-first.decoded // the lane of "k" is busy until first.release closes

	select {
	case r := <-do(&Release{Key: other, Token: "t1"}):
		require.NoError(t, r.Err)
		assert.True(t, r.OK, "the other lane's release")
	case <-time.After(10 * time.Second):
		t.Fatal("a name in the other lane waited for a busy lane")
	}

	released := do(&Release{Key: "k", Token: "t1"})
	time.Sleep(50 * time.Millisecond)
	assert.True(t, s.Exists("k"), "a release of k was applied before the earlier operation of k had returned")
	unstall(t, first, firstDone, released)
	assert.False(t, s.Exists("k"))
}

// Every operation of one name takes the same lane, whatever its kind.
func TestLaneIsTheNames(t *testing.T) {
	for _, name := range []string{"a", "b", "orders:7", "{x}:y"} {
		want := laneOf(&Acquire{Key: name}, 0)
		for _, op := range []Op{&Release{Key: name}, &Extend{Key: name}, &Fence{Key: name}, &Inspect{Key: name},
			&Force{Key: name}, &SemAcquire{Key: name}, &SemRelease{Key: name}, &SemExtend{Key: name},
			&ReadAcquire{Key: name}, &ReadRelease{Key: name}, &ReadExtend{Key: name}} {
			assert.Equal(t, want, laneOf(op, 7), "%s of %q", op.Name(), name)
		}
	}
}

// sharedStall is a stall that is Concurrent, as a reader's operation is.
type sharedStall struct{ stall }

func (*sharedStall) Concurrent() string { return "stall" }

// Readers' operations of one name leave while only other readers'
// operations of the name are in flight, and nothing else does: a release
// of the name, or the stalled reader's own release, waits for them, and a
// reader's grant waits for a release in flight.
func TestLaneLetsReadersPass(t *testing.T) {
	s := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	n := NewRedis(c)
	t.Cleanup(n.Close)
	require.NoError(t, s.Set("k", "t1"))
	do := sendTo(t, n)

	reader := &sharedStall{*newStall("k")}
	readerDone := do(reader)
	<-reader.decoded // one worker is busy with a reader's operation of k
	select {
	case <-do(&ReadRelease{Key: "k", Token: "r"}): // answered (k holds a plain lock: refused)
	case <-time.After(10 * time.Second):
		close(reader.release)
		t.Fatal("a reader's operation waited for another reader's")
	}
	own := do(&ReadRelease{Key: "k", Token: "stall"}) // the stalled holder's own
	released := do(&Release{Key: "k", Token: "t1"})
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
	read := do(&ReadAcquire{Key: "k", Token: "r", TTL: time.Minute})
	time.Sleep(50 * time.Millisecond)
	assert.False(t, s.Exists("k"), "a reader's grant went while another operation of its name was in flight")
	unstall(t, writer, writerDone, read)
}
