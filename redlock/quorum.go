package redlock

import (
	"errors"

	"github.com/redlock-go/redlock/internal/node"
)

// Quorums and their tally: how many nodes must agree, what each node
// said, and when the outcome of a round is certain. This is the one place
// that decides that no quorum is left, whether because too many nodes
// refused or failed (lost) or because so many fail in ways no retry can
// change that none could ever be reached (hopeless).

// quorum is the number of nodes that make a majority of n. Any two sets of
// quorum(n) nodes intersect, so two holders can never both have a quorum.
func quorum(n int) int { return n/2 + 1 }

// semQuorum is how many of n nodes must grant a permit of a semaphore
// of k permits: the least q with (k+1)·q > n·k. k+1 holders that each had
// q nodes would fill (k+1)·q places, while n nodes that each admit at most
// k holders have only n·k: so no k+1 holders can ever each have a quorum.
// For k = 1 it is the majority, quorum(n).
func semQuorum(n, k int) int {
	if k >= n {
		return n // n·k/(k+1) is n-1 from k = n-1 on; no overflow for a large k
	}
	return n*k/(k+1) + 1
}

// answer is what one node said, as far as the tally knows.
type answer uint8

const (
	pending answer = iota // not answered yet
	granted               // did what was asked
	refused               // answered no: held by another value, token absent
	failed                // error or timeout
	skipped               // left out on purpose: counts neither way
)

// failure is one node's error in a round.
type failure struct {
	node int
	err  error
}

// tally counts the answers of one round and knows when the outcome is
// certain.
type tally struct {
	n, quorum int
	yes, no   int // granted, and refused or failed
	refused   int // answered no, without error
	answers   []answer
	failures  []failure
}

func newTally(n int) *tally {
	return &tally{n: n, quorum: quorum(n), answers: make([]answer, n)}
}

// errSkipped is the vote of a node a round left out on purpose.
var errSkipped = errors.New("redlock: skipped")

// add counts node i's answer: granted when ok, else refused, or failed
// with err.
func (t *tally) add(i int, ok bool, err error) {
	if t.answers[i] != pending {
		return
	}
	switch {
	case errors.Is(err, errSkipped):
		t.answers[i] = skipped
		t.no++
	case err != nil:
		t.answers[i] = failed
		t.failures = append(t.failures, failure{i, err})
		t.no++
	case ok:
		t.answers[i] = granted
		t.yes++
	default:
		t.answers[i] = refused
		t.no++
		t.refused++
	}
}

// regrant turns node i's refusal into a grant: asked again, it granted.
func (t *tally) regrant(i int) {
	t.answers[i] = granted
	t.refused--
	t.no--
	t.yes++
}

// misconfigured is how many nodes failed with ErrMisconfigured.
func (t *tally) misconfigured() int {
	n := 0
	for _, f := range t.failures {
		if errors.Is(f.err, node.ErrMisconfigured) {
			n++
		}
	}
	return n
}

// hopeless reports whether the misconfigured nodes leave fewer than a
// quorum that could grant: retrying is pointless until they are fixed.
func (t *tally) hopeless() bool { return t.n-t.misconfigured() < t.quorum }

// pending is how many nodes have not answered.
func (t *tally) pending() int { return t.n - t.yes - t.no }

// won reports whether a quorum answered yes.
func (t *tally) won() bool { return t.yes >= t.quorum }

// lost reports whether a quorum can no longer answer yes.
func (t *tally) lost() bool { return t.n-t.no < t.quorum }

// decided reports whether the outcome is certain either way.
func (t *tally) decided() bool { return t.won() || t.lost() }

// lostForGood reports whether so many nodes refused (answered, without
// error, that they do not hold what was asked) that no quorum can hold it.
func (t *tally) lostForGood() bool { return t.refused > t.n-t.quorum }

// granted returns the nodes that granted.
func (t *tally) grantedNodes() []int {
	var out []int
	for i, a := range t.answers {
		if a == granted {
			out = append(out, i)
		}
	}
	return out
}
