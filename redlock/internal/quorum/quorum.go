package quorum

import (
	"errors"

	"github.com/redlock-go/redlock/internal/node"
)

// Quorums and their tally: how many nodes must agree, what each node
// said, and when the outcome of a round is certain. This is the one place
// that decides that no quorum is left, whether because too many nodes
// refused or failed (lost) or because so many fail in ways no retry can
// change that none could ever be reached (hopeless).

// Majority is the number of nodes that make a majority of n. Any two sets of
// Majority(n) nodes intersect, so two holders can never both have a quorum.
func Majority(n int) int { return n/2 + 1 }

// Permits is how many of n nodes must grant a permit of a semaphore
// of k permits: the least q with (k+1)·q > n·k. k+1 holders that each had
// q nodes would fill (k+1)·q places, while n nodes that each admit at most
// k holders have only n·k: so no k+1 holders can ever each have a quorum.
// For k = 1 it is the majority, Majority(n).
func Permits(n, k int) int {
	if k >= n {
		return n // n·k/(k+1) is n-1 from k = n-1 on; no overflow for a large k
	}
	return n*k/(k+1) + 1
}

// answer is what one node said, as far as the tally knows.
type answer uint8

const (
	pending answer = iota // not answered yet
	// Granted is a node that did what was asked.
	Granted
	refused // answered no: held by another value, token absent
	// Failed is a node that answered with an error, or not in time.
	Failed
	skipped // left out on purpose: counts neither way
)

// failure is one node's error in a round.
type failure struct {
	Node int
	Err  error
}

// Tally counts the answers of one round and knows when the outcome is
// certain.
type Tally struct {
	N, Majority int
	Yes, no     int // granted, and refused or failed
	refused     int // answered no, without error
	Answers     []answer
	Failures    []failure
}

func newTally(n int) *Tally {
	return &Tally{N: n, Majority: Majority(n), Answers: make([]answer, n)}
}

// errSkipped is the vote of a node a round left out on purpose.
var errSkipped = errors.New("redlock: skipped")

// add counts node i's answer: granted when ok, else refused, or failed
// with err.
func (t *Tally) add(i int, ok bool, err error) {
	if t.Answers[i] != pending {
		return
	}
	switch {
	case errors.Is(err, errSkipped):
		t.Answers[i] = skipped
		t.no++
	case err != nil:
		t.Answers[i] = Failed
		t.Failures = append(t.Failures, failure{i, err})
		t.no++
	case ok:
		t.Answers[i] = Granted
		t.Yes++
	default:
		t.Answers[i] = refused
		t.no++
		t.refused++
	}
}

// regrant turns node i's refusal into a grant: asked again, it granted.
func (t *Tally) regrant(i int) {
	t.Answers[i] = Granted
	t.refused--
	t.no--
	t.Yes++
}

// Misconfigured is how many nodes failed with ErrMisconfigured.
func (t *Tally) Misconfigured() int {
	n := 0
	for _, f := range t.Failures {
		if errors.Is(f.Err, node.ErrMisconfigured) {
			n++
		}
	}
	return n
}

// short reports whether, with unable nodes that cannot answer yes, fewer
// than a quorum are left that can: the one test of "no quorum is left"
// (lost, Hopeless, LostForGood, and an attempt's judge).
func (t *Tally) short(unable int) bool { return t.N-unable < t.Majority }

// Hopeless reports whether the misconfigured nodes leave fewer than a
// quorum that could grant: retrying is pointless until they are fixed.
func (t *Tally) Hopeless() bool { return t.short(t.Misconfigured()) }

// Pending is how many nodes have not answered.
func (t *Tally) Pending() int { return t.N - t.Yes - t.no }

// Won reports whether a quorum answered yes.
func (t *Tally) Won() bool { return t.Yes >= t.Majority }

// lost reports whether a quorum can no longer answer yes.
func (t *Tally) lost() bool { return t.short(t.no) }

// decided reports whether the outcome is certain either way.
func (t *Tally) decided() bool { return t.Won() || t.lost() }

// LostForGood reports whether so many nodes refused (answered, without
// error, that they do not hold what was asked) that no quorum can hold it.
func (t *Tally) LostForGood() bool { return t.short(t.refused) }

// RefusedNodes returns the nodes that answered no, without error.
func (t *Tally) RefusedNodes() []int { return t.nodes(refused) }

// GrantedNodes returns the nodes that granted.
func (t *Tally) GrantedNodes() []int { return t.nodes(Granted) }

// nodes returns the nodes whose answer is a.
func (t *Tally) nodes(a answer) []int {
	var out []int
	for i, got := range t.Answers {
		if got == a {
			out = append(out, i)
		}
	}
	return out
}
