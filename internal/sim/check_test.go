package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestStalled checks the liveness bound on made-up histories of the name
// "do" with clients 0-3, client 3 the one that waits: the faults healed at
// 0 s and the run stopped at 7 s.
func TestStalled(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	held := func(c int, from, to time.Duration) hold {
		return hold{client: c, res: "do", start: at(from), end: at(to)}
	}
	// turns returns n holds, each of client 0-2 in turn, back to back
	// from 0 s.
	turns := func(n int) []hold {
		var hs []hold
		step := 7 * time.Second / time.Duration(n)
		for i := range n {
			hs = append(hs, held(i%3, time.Duration(i)*step, time.Duration(i+1)*step))
		}
		return hs
	}
	for _, tc := range []struct {
		name    string
		holds   []hold
		stalled bool
	}{
		{"the waiter's turn came", append(turns(10), held(3, 6*time.Second, 6500*time.Millisecond)), false},
		{"it held the name as the faults healed", []hold{held(3, -time.Second, 4500*time.Millisecond)}, false},
		{"three long holders before it, in turn", turns(3), false},
		{"others turned often, the name never free", turns(turnsBound), false},
		{"others turned too often", turns(turnsBound + 1), true},
		{"the name lay free 2 s", []hold{held(0, 0, time.Second), held(1, 3*time.Second, 7*time.Second)}, false},
		{"the name lay free longer", []hold{held(0, 0, time.Second), held(1, 3001*time.Millisecond, 7*time.Second)}, true},
		{"free in three gaps", []hold{held(0, 0, time.Second), held(1, 2*time.Second, 3*time.Second), held(2, 4*time.Second, 6*time.Second)}, true},
		{"overlapping readers cover it", []hold{held(0, 0, 4*time.Second), held(1, 2*time.Second, 5*time.Second), held(2, 3*time.Second, 7*time.Second)}, false},
		{"a short hold inside a long one", []hold{held(0, 0, 7*time.Second), held(1, time.Second, 2*time.Second)}, false},
		{"nobody held it", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &history{start: t0, holds: tc.holds}
			var got []string // client 3's: the others may have waited too
			for _, s := range h.stalled(4, []string{"do"}, at(0), at(7*time.Second)) {
				if strings.HasPrefix(s, "client 3's") {
					got = append(got, s)
				}
			}
			if tc.stalled {
				assert.Len(t, got, 1)
				if len(got) == 1 {
					assert.Contains(t, got[0], "client 3's do held nothing from 0s to 7s")
				}
			} else {
				assert.Empty(t, got)
			}
		})
	}
}

// TestVerdicts checks each verdict's rule (verdicts_check.go) on made-up histories
// of the name "m": client 0's hold from 1 s, its validity until 3 s.
func TestVerdicts(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	mine := hold{client: 0, res: "m", who: "client 0", attempt: at(900 * time.Millisecond), start: at(time.Second), end: at(2 * time.Second)}
	other := func(kind holdKind, from, to time.Duration) hold {
		return hold{client: 1, res: "m", kind: kind, who: "client 1", attempt: at(from), start: at(from), end: at(to), freed: at(to)}
	}
	at2, until := at(2*time.Second), at(3*time.Second)
	for _, tc := range []struct {
		name   string
		v      verdict
		others []hold
		early  []time.Time
		untrue string // "" when the verdict is true
	}{
		{"nil release, nobody else", verdict{what: releasedNil, call: at2, until: until}, nil, nil, ""},
		{"nil release, another holder inside", verdict{what: releasedNil, call: at2, until: until},
			[]hold{other(exclusive, 1500*time.Millisecond, 1600*time.Millisecond)}, nil, "returned nil for its hold 1s-2s, while client 1 held it 1.5s-1.6s"},
		{"nil release, an early restart excuses no overlap", verdict{what: releasedNil, call: at2, until: until, heldAll: 1, quorum: 2},
			[]hold{other(exclusive, 1500*time.Millisecond, 1600*time.Millisecond)}, []time.Time{at(1200 * time.Millisecond)}, "returned nil"},
		{"nil release on a quorum of its own, beside a holder an early restart left short", verdict{what: releasedNil, call: at2, until: until, heldAll: 2, quorum: 2},
			[]hold{other(exclusive, 500*time.Millisecond, 2500*time.Millisecond)}, []time.Time{at(1200 * time.Millisecond)}, ""},
		{"nil release on a quorum of its own, no early restart", verdict{what: releasedNil, call: at2, until: until, heldAll: 2, quorum: 2},
			[]hold{other(exclusive, 500*time.Millisecond, 2500*time.Millisecond)}, nil, "returned nil"},
		{"nil release, another holder after its validity", verdict{what: releasedNil, call: at(4 * time.Second), until: until},
			[]hold{other(exclusive, 3500*time.Millisecond, 4*time.Second)}, nil, ""},
		{"nil release, a reader beside a reader", verdict{what: releasedNil, call: at2, until: until, hold: hold{kind: shared}},
			[]hold{other(shared, 1500*time.Millisecond, 1600*time.Millisecond)}, nil, ""},
		{"not held, a quorum answered holding", verdict{what: notHeldKind, call: at2, ret: at2, until: until, held: 2, quorum: 2}, nil, nil, "said not held"},
		{"not held, its validity ran out meanwhile", verdict{what: notHeldKind, call: at2, ret: until, until: until, held: 3, quorum: 2}, nil, nil, ""},
		{"not held, too few held", verdict{what: notHeldKind, call: at2, ret: at2, until: until, held: 1, quorum: 2}, nil, nil, ""},
		{"extended, a quorum till Until", verdict{what: extendedNil, call: at2, until: until, held: 2, quorum: 2}, nil, nil, ""},
		{"extended, too few till Until", verdict{what: extendedNil, call: at2, until: until, held: 1, quorum: 2}, nil, nil, "returned nil, until 3s"},
		{"refused, a competitor on a quorum", verdict{what: refusedHeld, call: at2, ret: at2, held: 2, quorum: 2}, nil, nil, ""},
		{"refused, a competitor that released meanwhile", verdict{what: refusedHeld, call: at2, ret: at2.Add(time.Millisecond), held: 1, quorum: 2},
			[]hold{other(exclusive, 1500*time.Millisecond, 2*time.Second+time.Microsecond)}, nil, ""},
		{"refused, nobody held it", verdict{what: refusedHeld, call: at2, ret: at2, held: 1, quorum: 2}, nil, nil, "refused as held by another"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.v
			v.op = "call"
			kind := v.hold.kind
			v.hold = mine
			v.hold.kind = kind
			h := &history{start: t0, holds: append([]hold{v.hold}, tc.others...), early: tc.early}
			got := h.untrue(v, h.holds)
			if tc.untrue == "" {
				assert.Empty(t, got)
			} else {
				assert.Contains(t, got, tc.untrue)
			}
		})
	}
}

// TestLostUpdates checks the counter's rule: an update lost is a
// violation, unless holds of the resource overlapped after an early
// restart, which the lock does not exclude (seed 127071).
func TestLostUpdates(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	a := hold{client: 0, res: "do", who: "client 0", attempt: at(0), start: at(0), end: at(2 * time.Second)}
	b := hold{client: 1, res: "do", who: "client 1", attempt: at(time.Second), start: at(time.Second), end: at(3 * time.Second)}
	for _, tc := range []struct {
		name  string
		early []time.Time
		want  []string
	}{
		{"no early restart: the overlap and the lost update", nil, []string{"client 1 held it", "updates lost"}},
		{"an early restart between: neither", []time.Time{at(500 * time.Millisecond)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory()
			h.start, h.holds, h.early = t0, []hold{a, b}, tc.early
			h.write("do", 1)
			h.write("do", 1) // both read 0 and wrote 1
			got := h.check()
			assert.Len(t, got, len(tc.want), "%q", got)
			for i, w := range tc.want {
				if i < len(got) {
					assert.Contains(t, got[i], w)
				}
			}
		})
	}
}
