package quorum

import (
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

func TestQuorum(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		assert.Equal(t, want, Majority(n), "quorum(%d)", n)
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
			q := Majority(n)
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
					assert.Equal(t, certainWin, tl.Won(), "n=%d code=%d after %d answers", n, code, i+1)
				}
				assert.Equal(t, yes >= q, tl.Won())
				assert.True(t, tl.decided())
			}
		})
	}
}

func TestTallyIgnoresSecondAnswer(t *testing.T) {
	tl := newTally(3)
	tl.add(0, true, nil)
	tl.add(0, true, nil)
	assert.Equal(t, 1, tl.Yes)
	assert.False(t, tl.decided())
}

func TestMustUndo(t *testing.T) {
	timeout := fmt.Errorf("%w", node.ErrNodeTimeout)
	first := &node.Acquire{Shape: node.Reentrant, Key: "k", Token: "t"}
	again := &node.Acquire{Shape: node.Reentrant, Key: "k", Token: "t", Reenter: true}
	for _, c := range []struct {
		name string
		rep  node.Reply
		op   node.Op
		want bool
	}{
		{"granted", node.Reply{OK: true}, &node.Acquire{}, true},
		{"granted, held again", node.Reply{OK: true}, again, true},
		{"held by another", node.Reply{Value: node.Grant{Holder: "x"}}, &node.Acquire{}, false},
		{"never sent", node.Reply{Err: node.ErrQueueFull}, &node.Acquire{}, false},
		{"node down", node.Reply{Err: fmt.Errorf("%w: x", node.ErrNodeDown)}, &node.Acquire{}, false},
		{"dial refused", node.Reply{Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, &node.Acquire{}, false},
		{"recovering", node.Reply{Err: fmt.Errorf("%w: x", node.ErrNodeRecovering)}, &node.Acquire{}, false},
		{"reply lost", node.Reply{Err: nodetest.ErrLostReply}, &node.Acquire{}, true},
		{"timed out", node.Reply{Err: timeout}, &node.Acquire{}, true},
		{"reply lost, reentrant's first hold", node.Reply{Err: nodetest.ErrLostReply}, first, true},
		{"reply lost, held again", node.Reply{Err: nodetest.ErrLostReply}, again, false},
	} {
		assert.Equal(t, c.want, mustUndo(c.rep, node.HoldsAgain(c.op)), c.name)
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
