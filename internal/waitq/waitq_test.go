package waitq

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestWakeOrder: announcements wake the waiters of a name oldest first, one
// per release, and copies of one release from other nodes wake no one.
func TestWakeOrder(t *testing.T) {
	ws := New(nodetest.Nodes(nodetest.Fakes(1)), func([]node.Op, time.Duration) {})
	t.Cleanup(ws.Close)
	w0 := ws.Join("k", time.Second)
	w1 := ws.Join("k", time.Second)
	woken := func(w *Waiter) bool {
		select {
		case <-w.wake:
			return true
		default:
			return false
		}
	}
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
