package waitq

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// woken reports whether w was woken since the last call, and takes the
// signal.
func woken(w *Waiter) bool {
	select {
	case <-w.wake:
		return true
	default:
		return false
	}
}

// TestWakeOrder: announcements wake the waiters of a name oldest first, one
// per release, and copies of one release from other nodes wake no one.
func TestWakeOrder(t *testing.T) {
	ws := New(nodetest.Nodes(nodetest.Fakes(1)), Config{Deliver: func([]node.Op, time.Duration) []node.Reply { return nil }})
	t.Cleanup(func() { _ = ws.Close(context.Background()) })
	w0 := ws.Join("k", time.Second)
	w1 := ws.Join("k", time.Second)
	ws.announce("k", "release-1", "")
	assert.True(t, woken(w0))
	ws.announce("k", "release-1", "") // the same release, from another node
	assert.False(t, woken(w0), "woken once per release")
	assert.False(t, woken(w1))
	w0.Leave(time.Second)
	ws.announce("k", "release-2", "")
	assert.True(t, woken(w1))
	ws.announce("other", "release-3", "")
	assert.False(t, woken(w1))
	// A release that names a waiter wakes that one, whatever its age.
	w2 := ws.Join("k", time.Second)
	ws.announce("k", "release-4", w2.id)
	assert.True(t, woken(w2))
	assert.False(t, woken(w1))
	ws.announce("k", "release-5", "another-process/waiter")
	assert.False(t, woken(w1), "another process's turn")
	assert.False(t, woken(w2))
	w1.Leave(time.Second)
	w2.Leave(time.Second)
}

// A reader's turn wakes every reader of the name, and no writer; a
// writer's turn wakes that writer alone.
func TestReadersWakeTogether(t *testing.T) {
	ws := New(nodetest.Nodes(nodetest.Fakes(1)), Config{Deliver: func([]node.Op, time.Duration) []node.Reply { return nil }})
	t.Cleanup(func() { _ = ws.Close(context.Background()) })
	r0 := ws.JoinReader("k", time.Second)
	w := ws.Join("k", time.Second)
	r1 := ws.JoinReader("k", time.Second)
	assert.False(t, node.Named(r0.id), "a reader's turn is announced to all")
	assert.True(t, node.Named(w.id))
	ws.announce("k", "release-1", "") // the oldest is a reader
	assert.True(t, woken(r0))
	assert.True(t, woken(r1), "readers go together")
	assert.False(t, woken(w))
	ws.announce("k", "release-2", w.id)
	assert.True(t, woken(w))
	assert.False(t, woken(r0))
	assert.False(t, woken(r1))
	for _, x := range []*Waiter{r0, w, r1} {
		x.Leave(time.Second)
	}
}

// A node that refuses the queue's commands is told no more queue changes,
// and off hears of it once; the other nodes keep their queues.
func TestQueueRefused(t *testing.T) {
	noperm := fmt.Errorf("%w: NOPERM User locker has no permissions to run the 'zadd' command", node.ErrMisconfigured)
	var mu sync.Mutex
	sent := map[int]int{}
	var off []int
	deliver := func(ops []node.Op, _ time.Duration) []node.Reply {
		replies := make([]node.Reply, len(ops))
		mu.Lock()
		defer mu.Unlock()
		for i, op := range ops {
			if op == nil {
				continue
			}
			sent[i]++
			replies[i].OK = true
			if i == 1 {
				replies[i] = node.Reply{Err: noperm}
			}
		}
		return replies
	}
	ws := New(nodetest.Nodes(nodetest.Fakes(2)), Config{Deliver: deliver, Off: func(i int, err error) {
		mu.Lock()
		defer mu.Unlock()
		off = append(off, i)
		assert.ErrorIs(t, err, node.ErrMisconfigured)
	}})
	t.Cleanup(func() { _ = ws.Close(context.Background()) })
	for range 5 {
		w := ws.Join("k", time.Second)
		waitSynced(t, ws)
		w.Requeue(time.Second)
		waitSynced(t, ws)
		w.Leave(time.Second)
		waitSynced(t, ws)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int{1}, off, "told once, for node 1")
	assert.Equal(t, 1, sent[1], "node 1 refused its first change and got no other")
	assert.GreaterOrEqual(t, sent[0], 10, "node 0 keeps its queue")
}

// waitSynced waits until no node's sync goroutine runs.
func waitSynced(t *testing.T, q *Queue) {
	t.Helper()
	assert.Eventually(t, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		for _, s := range q.syncing {
			if s {
				return false
			}
		}
		return true
	}, time.Second, time.Millisecond)
}

// A node's handoff reaches the waiter whose member it names; a handoff of
// a token retired (by Requeue) or of a waiter gone is an orphan, told to
// the layer above so that it releases the key, and so is one the waiter
// had not read when its token was retired.
func TestHandoffReachesItsWaiterOrIsOrphaned(t *testing.T) {
	var mu sync.Mutex
	var orphans []string
	ws := New(nodetest.Nodes(nodetest.Fakes(2)), Config{
		Deliver: func([]node.Op, time.Duration) []node.Reply { return nil },
		Orphan: func(i int, name, token string, _, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			orphans = append(orphans, fmt.Sprint(i, " ", name, " ", token))
		},
	})
	t.Cleanup(func() { _ = ws.Close(context.Background()) })
	orphaned := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(orphans)
	}
	w := ws.JoinHandoff("k", time.Second, 10*time.Second)
	first := w.Handoff()
	require.NotEmpty(t, first)
	assert.Equal(t, node.HandoffMember(ws.self, 10*time.Second, first), w.id)
	ws.handOver(1, node.ParseNotice(node.WakeChannel(ws.self), "t|"+w.id+node.HandedMark+"1700000000123|k"))
	h := <-w.Handed()
	assert.Equal(t, 1, h.Node)
	assert.Equal(t, first, h.Token)
	assert.Equal(t, time.UnixMilli(1700000000123), h.NodeTime)
	ws.handOver(0, node.Notice{Name: "k", Member: w.id, Handed: true}) // not read before the token is retired
	w.Requeue(time.Second)
	second := w.Handoff()
	assert.NotEqual(t, first, second, "a new token")
	assert.Equal(t, []string{"0 k " + first}, orphaned())
	ws.handOver(1, node.Notice{Name: "k", Member: node.HandoffMember(ws.self, 10*time.Second, first), Handed: true, At: time.UnixMilli(5)})
	assert.Equal(t, []string{"0 k " + first, "1 k " + first}, orphaned())
	w.Leave(time.Second)
	ws.handOver(0, node.Notice{Name: "k", Member: node.HandoffMember(ws.self, 10*time.Second, second), Handed: true, At: time.UnixMilli(5)})
	assert.Equal(t, []string{"0 k " + first, "1 k " + first, "0 k " + second}, orphaned())
	ws.handOver(0, node.Notice{Name: "k", Member: ws.self + "/plain-waiter", Handed: true, At: time.UnixMilli(5)})
	assert.Len(t, orphaned(), 3, "not a member that takes the lock handed over")
}

// A member a release popped is not removed from the node's queue again
// when its waiter leaves.
func TestPoppedMemberIsNotRemoved(t *testing.T) {
	sent := make(chan node.QueueChange, 16)
	deliver := func(ops []node.Op, _ time.Duration) []node.Reply {
		for _, op := range ops {
			if q, ok := op.(*node.Queue); ok {
				for _, c := range q.Changes {
					sent <- c
				}
			}
		}
		return make([]node.Reply, len(ops))
	}
	ws := New(nodetest.Nodes(nodetest.Fakes(1)), Config{Deliver: deliver})
	t.Cleanup(func() { _ = ws.Close(context.Background()) })
	w := ws.JoinHandoff("k", time.Second, 10*time.Second)
	c := <-sent
	require.Equal(t, w.id, c.Member)
	require.False(t, c.Remove)
	ws.popped(0, w.id)
	w.Leave(time.Second)
	other := ws.Join("k", time.Second) // a change the sync must send
	c = <-sent
	assert.Equal(t, other.id, c.Member, "the popped member's removal is not sent")
	other.Leave(time.Second)
	c = <-sent
	assert.True(t, c.Remove)
	assert.Equal(t, other.id, c.Member, "a member not popped is removed")
}

// authError is a server's refusal of the client as a whole, as go-redis
// returns it.
type authError string

func (e authError) Error() string { return string(e) }
func (authError) RedisError()     {}

// A node that refuses the client's password refuses everything, not the
// queue: the queue stays on there, and off hears nothing.
func TestQueueNotRefusedByPassword(t *testing.T) {
	wrongPass := fmt.Errorf("%w: %w", node.ErrMisconfigured, authError("WRONGPASS invalid username-password pair"))
	deliver := func(ops []node.Op, _ time.Duration) []node.Reply {
		replies := make([]node.Reply, len(ops))
		for i := range replies {
			replies[i] = node.Reply{Err: wrongPass}
		}
		return replies
	}
	var mu sync.Mutex
	var off []int
	ws := New(nodetest.Nodes(nodetest.Fakes(2)), Config{Deliver: deliver, Off: func(i int, _ error) {
		mu.Lock()
		defer mu.Unlock()
		off = append(off, i)
	}})
	t.Cleanup(func() { _ = ws.Close(context.Background()) })
	w := ws.Join("k", time.Second)
	waitSynced(t, ws)
	w.Leave(time.Second)
	waitSynced(t, ws)
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, off, "no node turned the queue off")
}

// The bounds the facade's tests wait out (redlock/notify_test.go): a
// change here must change them too.
func TestCourtesyBounds(t *testing.T) {
	assert.Equal(t, 20*time.Millisecond, courtesyMax)
	assert.Less(t, courtesyMin, courtesyMax)
}

// A release that reached waiters owes them a courtesy of four times what
// it took, within its bounds, counted from its return; one that reached no
// one owes nothing.
func TestCourtesy(t *testing.T) {
	q := New(make([]node.Node, 3), Config{})
	t0 := time.Unix(1000, 0)

	var silent Release
	silent.Watch(q, "a")
	silent.Heard(0, node.Reply{OK: true, Value: node.Released{}})
	assert.False(t, silent.Done(time.Millisecond, t0), "no one heard it, no one waits")
	assert.Zero(t, q.Courtesy("a", t0))

	var named Release
	named.Watch(q, "a")
	named.Heard(1, node.Reply{OK: true, Value: node.Released{Named: true}})
	require.True(t, named.Done(2*time.Millisecond, t0), "a node named a waiter")
	assert.Equal(t, 8*time.Millisecond, q.Courtesy("a", t0))
	assert.Equal(t, 3*time.Millisecond, q.Courtesy("a", t0.Add(5*time.Millisecond)))
	assert.LessOrEqual(t, q.Courtesy("a", t0.Add(8*time.Millisecond)), time.Duration(0), "over")
	assert.Zero(t, q.Courtesy("a", t0), "an ended courtesy is forgotten")

	var others Release
	others.Watch(q, "b")
	others.Heard(2, node.Reply{OK: true, Value: node.Released{Heard: 2}})
	require.True(t, others.Done(time.Second, t0), "another process's waiters heard it")
	assert.Equal(t, courtesyMax, q.Courtesy("b", t0), "at most courtesyMax")

	var lone Release
	lone.Watch(q, "c")
	lone.Heard(0, node.Reply{OK: true, Value: node.Released{Heard: 1}})
	require.True(t, lone.Done(0, t0), "one subscriber heard it, and it is not this process")
	assert.Equal(t, courtesyMin, q.Courtesy("c", t0), "at least courtesyMin")
}
