package sim

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// The workloads' side of the verdicts (verdicts_check.go says what each
// claims): each call whose verdict is checked goes through one of these,
// which read the truth the check needs from the nodes around the call.

// A grant is an acquisition a workload holds: its hold (what the history
// records, for its first name), every name it holds, and the quorum of
// nodes its releases and extensions need.
type grant struct {
	hold
	names  []string
	quorum int
}

// majority is a lock's quorum of n nodes.
func majority(n int) int { return n/2 + 1 }

// took completes g once its acquisition returned: its start, and its
// token as the nodes hold it.
func (s *Sim) took(g *grant) {
	g.start = time.Now()
	g.token = s.tokenOf(g.names[0], g.client, g.attempt)
}

// heldNow returns which nodes hold g's token on every one of its names
// now.
func (s *Sim) heldNow(g *grant) []bool {
	return s.heldTill(g, time.Now(), time.Time{})
}

// heldTill returns which nodes hold g's token on every one of its names
// until at least t, or restarted or stepped their clock since faulted (the
// zero time: none).
func (s *Sim) heldTill(g *grant, t, faulted time.Time) []bool {
	out := make([]bool, len(s.nodes))
	if g.token == "" {
		return out
	}
	ends := make([]time.Time, len(s.nodes))
	for k, name := range g.names {
		for i, end := range s.holding(name, g.token) {
			if k == 0 || end.Before(ends[i]) {
				ends[i] = end
			}
		}
	}
	for i, end := range ends {
		out[i] = !end.IsZero() && !end.Before(t) || !faulted.IsZero() && s.hist.faultedBetween(i, faulted, time.Now())
	}
	return out
}

// unfaulted returns held without the nodes whose clock stepped, or that
// restarted, while a call ran from call to ret: such a node may have lost
// the key (expired by the step, gone with the restart) before the call's
// request reached it, and then truly answered that it no longer held the
// token (simulator seeds 110009 and 111050: a clock stepped ahead during
// an Extend). What a not-held verdict claims is judged at the nodes'
// answers, which the call cannot see before it asks.
func (s *Sim) unfaulted(held []bool, call, ret time.Time) []bool {
	out := slices.Clone(held)
	for i := range out {
		if out[i] && s.hist.faultedBetween(i, call, ret) {
			out[i] = false
		}
	}
	return out
}

// count returns how many of nodes are set.
func count(nodes []bool) int {
	n := 0
	for _, on := range nodes {
		if on {
			n++
		}
	}
	return n
}

// notHeld fills v, the verdict of a call that returned err (ErrNotHeld),
// when held says which nodes held the token as it began: what it claims
// is checked against every node, those that failed included (see
// notHeldUntrue); the failed are counted for the message.
//
// resent, for a release, are the nodes it reached twice (the client
// resent it after its reply was lost) and found another's token on at
// its return: its first try freed the key there and another client took
// it (a waiter it woke, or one it handed the key to), and the resend's
// answer, the only one the library read, says the key is another's.
// Their answer to the release is lost, as a failed node's is.
func notHeld(v *verdict, err error, held, resent []bool) {
	v.what, v.err = notHeldKind, err.Error()
	v.clockJump = errors.Is(err, redlock.ErrClockJump)
	for _, ne := range report.NodeErrors(err) {
		if ne.Index >= 0 && ne.Index < len(held) {
			v.failed++
		}
	}
	counted := slices.Clone(held)
	for i, on := range resent {
		if on && counted[i] {
			counted[i] = false
			v.resent++
		}
	}
	v.heldAll, v.held = count(held), count(counted)
}

// release releases g with op (named name), records its verdict when it is
// nil or ErrNotHeld, and records g's holds (one per name, each until end)
// with the release's return. final false marks a release that only drops
// one of a reentrant lock's holds: its nil claims nothing.
func (s *Sim) release(g *grant, w window, end time.Time, name string, final bool, op func(context.Context) error) {
	call, until := time.Now(), w.Until()
	held := s.heldNow(g)
	sent := s.tokens.reachedCounts(g.token, len(s.nodes))
	ctx, cancel := unlockCtx()
	err := op(ctx)
	cancel()
	ret := time.Now()
	resent := s.resentTaken(g, sent)
	for _, res := range g.names {
		x := g.hold
		x.res, x.end, x.freed = res, end, ret
		if final {
			v := verdict{op: name, hold: x, call: call, ret: ret, until: until, quorum: g.quorum}
			switch {
			case err == nil:
				v.what = releasedNil
				v.heldAll = count(held)
				s.hist.judged(v)
			case errors.Is(err, redlock.ErrNotHeld):
				notHeld(&v, err, s.unfaulted(held, call, ret), resent)
				s.hist.judged(v)
			}
		}
		s.hist.add(x)
	}
}

// resentTaken returns the nodes that requests carrying g's token reached
// twice or more since sent (their counts then, see tokens.reached) and
// whose keys of g's names hold another token now: a release resent after
// its first try freed the key there (see notHeld).
func (s *Sim) resentTaken(g *grant, sent []int) []bool {
	out := make([]bool, len(s.nodes))
	if g.token == "" {
		return out
	}
	now := s.tokens.reachedCounts(g.token, len(s.nodes))
	for i, n := range s.nodes {
		if now[i]-sent[i] < 2 {
			continue
		}
		for _, name := range g.names {
			out[i] = out[i] || slices.ContainsFunc(n.grips(name), func(x grip) bool { return x.token != g.token })
		}
	}
	return out
}

// extendable is a window that can be extended.
type extendable interface {
	window
	Extend(ctx context.Context) error
}

// extend extends g (now and then, as a holder that needs more time does)
// and records its verdict when it is nil or ErrNotHeld.
func (s *Sim) extend(g *grant, w extendable) {
	call, until := time.Now(), w.Until()
	held := s.heldNow(g)
	ctx, cancel := unlockCtx()
	err := w.Extend(ctx)
	cancel()
	v := verdict{op: "Extend", hold: g.hold, call: call, ret: time.Now(), until: until, quorum: g.quorum}
	switch {
	case err == nil:
		v.what, v.until = extendedNil, w.Until()
		v.held = count(s.heldTill(g, v.until, call))
	case errors.Is(err, redlock.ErrNotHeld):
		notHeld(&v, err, s.unfaulted(held, call, v.ret), nil)
	default:
		return
	}
	v.hold.res = g.names[0]
	s.hist.judged(v)
}

// refused records the verdict of an acquisition of g, op, that failed with
// err, at its return, when err says the lock is held by another: a
// TryLock's, or a LockWithin's whose wait ended (what its last attempt
// that could tell found: the window is the whole call).
func (s *Sim) refused(g *grant, op string, err error) {
	if !heldElsewhere(err) {
		return
	}
	most := s.competitor(g.names[0], g.client)
	s.hist.judged(verdict{what: refusedHeld, hold: g.hold, call: g.attempt, ret: time.Now(),
		op: op, held: most, quorum: g.quorum, err: err.Error()})
}

// heldElsewhere reports whether err, a refused attempt's, says that
// another holds the lock: redlock.ErrHeld.
func heldElsewhere(err error) bool {
	return errors.Is(err, redlock.ErrHeld)
}

// sighted records that a node held a token of name now, as x says: it
// extends the last sighting of that token there.
func (h *history) sighted(name string, x sighting) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := h.quorums[name]
	for k := len(seen) - 1; k >= 0 && k >= len(seen)-32; k-- {
		if seen[k].token == x.token && seen[k].node == x.node {
			seen[k].last = x.last
			return
		}
	}
	h.quorums[name] = append(seen, x)
}

// sightedBetween reports whether one token of another attempt than c's
// call from `from` was on each of a quorum of nodes, at some instant from
// `from` to to (not all at one: a refused attempt's nodes answer at their
// own instants). Another client's token counts, and so does one client c
// sent before the call: its earlier attempt, which failed, and whose late
// grants were still being undone in the background as this call asked
// (seed 630067: the undo of a node waits for that node's reply to the
// acquisition, and the next attempt went ahead of it). To the call, that
// is another acquisition's key, as another client's failed attempt's is.
// Called with h.mu held.
func (h *history) sightedBetween(name string, c, quorum int, from, to time.Time) bool {
	nodes := map[string]map[int]bool{}
	for _, x := range h.quorums[name] {
		if x.client == c && !x.sent.Before(from) || x.first.After(to) || x.last.Before(from) {
			continue
		}
		if nodes[x.token] == nil {
			nodes[x.token] = map[int]bool{}
		}
		nodes[x.token][x.node] = true
		if len(nodes[x.token]) >= quorum {
			return true
		}
	}
	return false
}
