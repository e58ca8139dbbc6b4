package redlock

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
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
	}{{true, nil}, {false, nil}, {false, errLostReply}}
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
