package integration

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redlock-go/redlock/redlock"
)

// The history checker. Every simulated client of a scenario lives in the
// test process, so one monotonic clock (time.Now) orders all of them. A
// scenario records:
//
//   - each acquisition as a hold: [acquired, min(released, Until)] and its
//     fencing token. Two holds must never overlap (checkNoOverlap).
//   - each critical section's increment of a read-sleep-write counter on
//     the resource Redis; the counter must end equal to the number of
//     sections (a lost update means two holders interleaved).
//   - each fenced write (redlock.SetFenced, accepted or refused) and read of
//     a register on the resource Redis, checked by porcupine against the
//     fenced-register model: a write is accepted iff its token is at least
//     the highest accepted so far, and a read returns the last accepted
//     value. A stale write that the resource accepted makes it fail.

// hold is one acquisition's validity as its holder may rely on it.
type hold struct {
	client     int
	start, end time.Time
	fence      uint64
}

// overlap is a pair of holds that overlap.
type overlap struct{ a, b hold }

// history is what every client of one scenario did, on one clock. It is
// safe for concurrent use.
type history struct {
	origin time.Time

	mu       sync.Mutex
	holds    []hold
	ops      []porcupine.Operation
	sections int // critical sections that incremented the counter
}

func newHistory() *history { return &history{origin: time.Now()} }

// ms shows t in milliseconds from the history's origin.
func (h *history) ms(t time.Time) string {
	return fmt.Sprintf("%.1fms", float64(t.Sub(h.origin))/1e6)
}

// since is t in nanoseconds from the origin, porcupine's timestamps.
func (h *history) since(t time.Time) int64 { return int64(t.Sub(h.origin)) }

// holding is an acquisition in progress; released closes its window.
type holding struct {
	h      *history
	client int
	m      *redlock.Mutex
	start  time.Time
	fence  uint64
}

// acquired records that client's m was acquired just now (call it right
// after Lock or TryLock returned nil).
func (h *history) acquired(client int, m *redlock.Mutex) *holding {
	return &holding{h: h, client: client, m: m, start: time.Now(), fence: m.Fence()}
}

// released closes the window at min(now, Until); call it before Unlock
// (Until is zero after) or when the holder stops relying on the lock.
func (hd *holding) released() hold {
	end := time.Now()
	if until := hd.m.Until(); until.Before(end) {
		end = until
	}
	return hd.h.addHold(hold{client: hd.client, start: hd.start, end: end, fence: hd.fence})
}

func (h *history) addHold(hd hold) hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holds = append(h.holds, hd)
	return hd
}

// Holds returns a copy of the holds recorded so far.
func (h *history) allHolds() []hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.holds)
}

// checkNoOverlap returns every pair of holds that overlap. Windows that
// only touch (one ends when the other starts) do not.
func checkNoOverlap(holds []hold) []overlap {
	sorted := slices.Clone(holds)
	slices.SortFunc(sorted, func(a, b hold) int { return a.start.Compare(b.start) })
	var out []overlap
	var latest time.Time // the latest end among the holds before b
	for i, b := range sorted {
		if b.start.Before(latest) {
			for _, a := range sorted[:i] {
				if b.start.Before(a.end) {
					out = append(out, overlap{a, b})
				}
			}
		}
		if b.end.After(latest) {
			latest = b.end
		}
	}
	return out
}

// fenceInversions returns the pairs of successive holds (by start) whose
// fencing tokens do not strictly increase; holds without a token are
// skipped.
func fenceInversions(holds []hold) []overlap {
	var fenced []hold
	for _, hd := range holds {
		if hd.fence != 0 {
			fenced = append(fenced, hd)
		}
	}
	slices.SortFunc(fenced, func(a, b hold) int { return a.start.Compare(b.start) })
	var out []overlap
	for i := 1; i < len(fenced); i++ {
		if fenced[i].fence <= fenced[i-1].fence {
			out = append(out, overlap{fenced[i-1], fenced[i]})
		}
	}
	return out
}

// describe renders overlapping or inverted pairs readably.
func (h *history) describe(pairs []overlap) []string {
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = fmt.Sprintf("client %d [%s, %s] fence %d / client %d [%s, %s] fence %d",
			p.a.client, h.ms(p.a.start), h.ms(p.a.end), p.a.fence,
			p.b.client, h.ms(p.b.start), h.ms(p.b.end), p.b.fence)
	}
	return out
}

// The fenced register: porcupine's model of what SetFenced promises.

type registerInput struct {
	write bool
	value string
	fence uint64
}

type registerOutput struct {
	accepted bool   // a write's outcome
	unknown  bool   // a write whose outcome was not learnt (a network error)
	value    string // a read's result
}

type registerState struct {
	value   string
	highest uint64
}

var fencedRegister = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{registerState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(registerState), input.(registerInput), output.(registerOutput)
		if !in.write {
			if out.value == s.value {
				return []any{s}
			}
			return nil
		}
		ok := in.fence >= s.highest
		next := registerState{value: in.value, highest: in.fence}
		switch {
		case out.unknown && ok:
			return []any{s, next}
		case out.unknown:
			return []any{s}
		case out.accepted != ok:
			return nil // accepted a stale token, or refused a current one
		case ok:
			return []any{next}
		default:
			return []any{s}
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(registerInput), output.(registerOutput)
		if !in.write {
			return fmt.Sprintf("read() -> %q", out.value)
		}
		switch {
		case out.unknown:
			return fmt.Sprintf("write(%q, fence %d) -> ?", in.value, in.fence)
		case out.accepted:
			return fmt.Sprintf("write(%q, fence %d) -> accepted", in.value, in.fence)
		}
		return fmt.Sprintf("write(%q, fence %d) -> stale", in.value, in.fence)
	},
	DescribeState: func(state any) string {
		s := state.(registerState)
		return fmt.Sprintf("%q (fence %d)", s.value, s.highest)
	},
}).ToModel()

// checkRegister runs porcupine on a register history: Ok, Illegal, or
// Unknown when it ran out of time.
func checkRegister(ops []porcupine.Operation) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(fencedRegister, ops, 30*time.Second)
}

// staleAccepted returns the accepted writes whose token was below that of
// a write accepted before they were sent: what a fenced resource must
// refuse. It is the countable part of what porcupine checks.
func staleAccepted(ops []porcupine.Operation) []porcupine.Operation {
	var accepted []porcupine.Operation
	for _, op := range ops {
		if op.Input.(registerInput).write && op.Output.(registerOutput).accepted {
			accepted = append(accepted, op)
		}
	}
	byReturn := slices.Clone(accepted)
	slices.SortFunc(byReturn, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
	slices.SortFunc(accepted, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	var out []porcupine.Operation
	var highest uint64 // the highest token among writes returned so far
	next := 0
	for _, w := range accepted {
		for ; next < len(byReturn) && byReturn[next].Return < w.Call; next++ {
			highest = max(highest, byReturn[next].Input.(registerInput).fence)
		}
		if w.Input.(registerInput).fence < highest {
			out = append(out, w)
		}
	}
	return out
}

func (h *history) registerOps() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

func (h *history) addOp(op porcupine.Operation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}
