package quorum

import (
	"slices"
	"testing"
	"time"
)

// JumpsOf counts each node's forward jumps as Jumps does, and what it
// returned before a jump stays as it was: a grant keeps the counts of its
// own time, which a later jump must not rewrite.
func TestJumpsOfKeepsEarlierCounts(t *testing.T) {
	g := NewClockGuard(3, 50*time.Millisecond, nil, nil)
	t0 := time.Now()
	exchange := func(i int, at time.Duration, ahead time.Duration) {
		sent := t0.Add(at)
		_ = g.Check(i, sent, sent.Add(time.Millisecond), sent.Add(500*time.Microsecond+ahead).Round(0))
	}
	for i := range 3 {
		exchange(i, 0, 0)
	}
	before := g.JumpsOf()
	exchange(1, time.Second, 0)          // on time
	exchange(2, time.Second, -time.Hour) // stepped back: not counted
	exchange(1, 2*time.Second, time.Hour)
	if got := g.JumpsOf(); !slices.Equal(got, []int{0, 1, 0}) {
		t.Errorf("after node 1 jumped ahead: JumpsOf() = %v, want [0 1 0]", got)
	}
	if g.Jumps(1) != 1 || g.Jumps(2) != 0 {
		t.Errorf("Jumps: node 1 %d, node 2 %d; want 1 and 0", g.Jumps(1), g.Jumps(2))
	}
	if !slices.Equal(before, []int{0, 0, 0}) {
		t.Errorf("counts taken before the jump became %v", before)
	}
}
