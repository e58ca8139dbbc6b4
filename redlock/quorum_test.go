package redlock

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

func TestQuorum(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		assert.Equal(t, want, quorum(n), "quorum(%d)", n)
	}
}

// TestTallyDecidesExactlyWhenCertain enumerates every sequence of answers
// for N = 1..7 nodes and checks, after each answer, that the tally has
// decided exactly when all ways the remaining nodes could answer lead to the
// same outcome, and that the outcome is right.
func TestTallyDecidesExactlyWhenCertain(t *testing.T) {
	outcomes := []struct {
		ok  bool
		err error
	}{{true, nil}, {false, nil}, {false, nodetest.ErrLostReply}}
	for n := 1; n <= 7; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			q := quorum(n)
			total := 1
			for range n {
				total *= len(outcomes)
			}
			for code := range total {
				tl := newTally(n)
				yes := 0
				for i, c := 0, code; i < n; i, c = i+1, c/len(outcomes) {
					o := outcomes[c%len(outcomes)]
					tl.add(i, o.ok, o.err)
					if o.ok {
						yes++
					}
					left := n - i - 1
					certainWin := yes >= q
					certainLoss := yes+left < q
					assert.Equal(t, certainWin || certainLoss, tl.decided(), "n=%d code=%d after %d answers", n, code, i+1)
					assert.Equal(t, certainWin, tl.won(), "n=%d code=%d after %d answers", n, code, i+1)
				}
				assert.Equal(t, yes >= q, tl.won())
				assert.True(t, tl.decided())
			}
		})
	}
}

func TestTallyIgnoresSecondAnswer(t *testing.T) {
	tl := newTally(3)
	tl.add(0, true, nil)
	tl.add(0, true, nil)
	assert.Equal(t, 1, tl.yes)
	assert.False(t, tl.decided())
}

func TestMustUndo(t *testing.T) {
	timeout := fmt.Errorf("%w", ErrNodeTimeout)
	for _, c := range []struct {
		name      string
		rep       node.Reply
		reentrant bool
		want      bool
	}{
		{"granted", node.Reply{OK: true}, false, true},
		{"granted, reentrant", node.Reply{OK: true}, true, true},
		{"held by another", node.Reply{Value: node.Grant{Holder: "x"}}, false, false},
		{"never sent", node.Reply{Err: node.ErrQueueFull}, false, false},
		{"node down", node.Reply{Err: fmt.Errorf("%w: x", ErrNodeDown)}, false, false},
		{"dial refused", node.Reply{Err: errRefused}, false, false},
		{"recovering", node.Reply{Err: fmt.Errorf("%w: x", ErrNodeRecovering)}, false, false},
		{"reply lost", node.Reply{Err: nodetest.ErrLostReply}, false, true},
		{"timed out", node.Reply{Err: timeout}, false, true},
		{"reply lost, reentrant", node.Reply{Err: nodetest.ErrLostReply}, true, false},
	} {
		assert.Equal(t, c.want, mustUndo(c.rep, c.reentrant), c.name)
	}
}

func TestOutranks(t *testing.T) {
	assert.True(t, outranks(2, "a", 1, "z"), "more nodes")
	assert.False(t, outranks(1, "z", 2, "a"), "fewer nodes")
	assert.True(t, outranks(2, "b", 2, "a"), "as many, greater token")
	assert.False(t, outranks(2, "a", 2, "b"), "as many, smaller token")
	assert.False(t, outranks(2, "", 2, "a"), "an unknown holder never wins a tie")
	// Of any two contenders that see each other with the same counts,
	// exactly one gives way.
	for _, c := range [][4]any{{1, "a", 1, "b"}, {2, "x", 1, "y"}, {3, "m", 3, "n"}} {
		x := outranks(c[0].(int), c[1].(string), c[2].(int), c[3].(string))
		y := outranks(c[2].(int), c[3].(string), c[0].(int), c[1].(string))
		assert.NotEqual(t, x, y, "%v", c)
	}
}

// nearAndFar returns a Redlock over five fakes: three near nodes (1ms) and
// two far ones (50ms).
func nearAndFar(t *testing.T) (*Redlock, []*nodetest.Fake) {
	t.Helper()
	r, fs := newFakeRedlock(t, 5, WithNodeTimeout(200*time.Millisecond))
	for i, f := range fs {
		d := time.Millisecond
		if i >= 3 {
			d = 50 * time.Millisecond
		}
		f.Faults(func(n *nodetest.Fake) { n.Delay = d })
	}
	return r, fs
}

// Two contenders split the near nodes; the far ones answer 50ms later. The
// one that is outranked gives way about one round trip after the split
// shows, instead of waiting for the far nodes.
func TestSplitVoteLoserGivesWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := nearAndFar(t)
		// A competitor ("~" ranks above any token) holds two near nodes.
		fs[0].Set("k", "~", time.Minute)
		fs[1].Set("k", "~", time.Minute)
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		_, err := m.tryLock(t.Context(), "", maxReasks)
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.Contains(t, err.Error(), "gave way")
		assert.Less(t, time.Since(start), 10*time.Millisecond, "the loser waited for the far nodes")
		synctest.Wait()
		_, held := fs[2].Get("k")
		assert.False(t, held, "its grant was released")
	})
}

// The contender that ranks first asks the nodes its competitor holds again
// once the competitor had time to give way, and completes its quorum
// without waiting for the far nodes.
func TestSplitVoteWinnerAsksAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := nearAndFar(t)
		// A competitor ("0" ranks below any token) holds one near node,
		// and gives way 3ms later.
		fs[0].Set("k", "0", 3*time.Millisecond)
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		_, err := m.tryLock(t.Context(), "", maxReasks) // as Lock's attempts do
		require.NoError(t, err)
		took := time.Since(start)
		assert.Less(t, took, 10*time.Millisecond, "the winner waited for the far nodes")
		assert.Greater(t, fs[0].Count("acquire"), 1, "node 0 was asked again")
		v, _ := fs[0].Get("k")
		assert.Equal(t, tokenOf(m), v)
	})
}

// TryLock, a single attempt for callers that try in a loop, does not ask
// again: it waits for the far nodes instead.
func TestTryLockDoesNotAskAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := nearAndFar(t)
		fs[0].Set("k", "0", 3*time.Millisecond)
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		require.NoError(t, m.TryLock(t.Context()))
		assert.Equal(t, 50*time.Millisecond, time.Since(start))
		assert.Equal(t, 1, fs[0].Count("acquire"))
	})
}

// An attempt that is not split (no grant) neither asks again nor waits.
func TestNoReaskWithoutGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs {
			f.Set("k", "0", time.Minute)
		}
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		_, err := m.tryLock(t.Context(), "", maxReasks)
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.Zero(t, time.Since(start), "held everywhere: decided at once, no wait for a re-ask")
		time.Sleep(time.Second)
		for _, f := range fs {
			assert.Equal(t, 1, f.Count("acquire"))
		}
	})
}

// An attempt woken by the announced release of a token asks again the
// nodes that still hold that token (their release is on its way), and
// never gives way to it; an attempt not told of the release fails.
func TestReleasedTokenAskedAgain(t *testing.T) {
	for _, told := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			r, fs := newFakeRedlock(t, 3)
			for _, f := range fs {
				f.Faults(func(n *nodetest.Fake) { n.Delay = 100 * time.Microsecond })
			}
			// The holder's release reaches nodes 0 and 1 at 150µs.
			fs[0].Set("k", "released", 150*time.Microsecond)
			fs[1].Set("k", "released", 150*time.Microsecond)
			m := newFakeMutex(t, r, "k")
			released := ""
			if told {
				released = "released"
			}
			_, err := m.tryLock(t.Context(), released, maxReasks)
			if told {
				require.NoError(t, err)
				assert.Equal(t, 2, fs[0].Count("acquire"), "asked again")
			} else {
				require.ErrorIs(t, err, ErrNotAcquired)
			}
		})
	}
}
