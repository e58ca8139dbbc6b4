package sim

import (
	"fmt"
	"slices"
	"time"
)

// What the library says, checked as a promise about the nodes (STYLE.md,
// "A verdict is a promise"). The truth is the simulated nodes' state, read
// on the simulator's true clock (truth.go): which nodes hold the hold's
// token, and until when; and the history of holds. Each verdict is about
// one hold h: from its acquisition (start) to its window, [start, min(the
// call's start, h's validity end as its holder knew it then: Until)].
// What makes each kind true is stated on the function that checks it:
// releaseUntrue, notHeldUntrue, extendUntrue and refusalUntrue.
type verdict struct {
	what   verdictKind
	op     string    // the call, for the message
	hold   hold      // the hold it is about (the refused attempt's, for a refusal)
	call   time.Time // when the call began
	ret    time.Time // when it returned
	until  time.Time // Until when the call began; a nil Extend's: the Until it returned
	held   int       // nodes that held the token, as each kind asks (see its function)
	quorum int
	err    string // the error it returned (ErrNotHeld)
	// clockJump: the error says the lease was given up for a node's
	// clock jump (redlock.ErrClockJump)
	clockJump bool
	// ErrNotHeld's: the nodes that held the token as the call began,
	// those its error names as failed, and those a resent release found
	// another's (held counts the failed, not the resent: see notHeldUntrue)
	heldAll, failed, resent int
}

type verdictKind int

const (
	releasedNil verdictKind = iota
	notHeldKind
	extendedNil
	refusedHeld
)

func (h *history) judged(v verdict) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.verdicts = append(h.verdicts, v)
}

// untrue returns why verdict v is false, "" when it is true; hs are the
// holds of its name. Called with h.mu held.
func (h *history) untrue(v verdict, hs []hold) string {
	switch v.what {
	case releasedNil:
		return h.releaseUntrue(v, hs)
	case notHeldKind:
		return h.notHeldUntrue(v)
	case extendedNil:
		return h.extendUntrue(v)
	case refusedHeld:
		return h.refusalUntrue(v, hs)
	}
	return ""
}

// releaseUntrue checks a release that returned nil (Unlock, RUnlock,
// Semaphore.Release, a reentrant lock's final Unlock; a multi-name lock's,
// for each name). It says h held its lock throughout its window: no other
// hold of the name whose kind excludes h's (an exclusive hold excludes
// any, a reader excludes writers; a permit excludes none but the limit's
// worth) was in force within the window, or, for a permit, fewer than
// limit other permits were at every instant of it. Early restarts do not
// excuse it, but for one case: h's own token stood on a quorum of nodes
// as its release began, and a node restarted early while each overlapping
// hold lasted, before h's window ended: then the overlapping hold is the
// one the restart left short of its quorum (its holder's verdicts are judged on their own), and h held the
// lock as far as the nodes can tell. A release that counted a node it
// should not have (the release-gone mutant) finds its token on fewer.
// It also says h held a quorum up to the release: as the release began,
// h's token stood on a quorum of nodes (each node that counts held it
// then: a key a resend finds gone was there until the first try), unless
// some node's clock stepped during the hold (a node may then have expired
// the key early, unseen: the clock guard's stated limit).
func (h *history) releaseUntrue(v verdict, hs []hold) string {
	x := v.hold
	end := minTime(v.call, v.until)
	if v.quorum > 0 && v.heldAll < v.quorum && !h.steppedWithin(x.attempt, v.call) {
		return fmt.Sprintf("%s: %s's %s returned nil for its hold %v-%v, while its token stood on %d nodes as it began, quorum %d", x.res, x.who, v.op,
			h.at(x.start), h.at(end), v.heldAll, v.quorum)
	}
	in := beside(x, end, hs)
	if len(in) > 0 && v.heldAll >= v.quorum && !slices.ContainsFunc(in, func(o hold) bool { return !h.earlyWithin(o.start, end) }) {
		return ""
	}
	if len(in) > 0 && (x.kind != permit || h.crowded(in, x.start, end) >= x.limit) {
		return fmt.Sprintf("%s: %s's %s returned nil for its hold %v-%v, while %s held it %v-%v", x.res, x.who, v.op,
			h.at(x.start), h.at(end), in[0].who, h.at(in[0].start), h.at(in[0].end))
	}
	return ""
}

// notHeldUntrue checks ErrNotHeld from a release or an Extend. It says h's
// hold had ended by the time it returned: it returned at or after Until
// (the nodes may have let the token expire while the call ran), or fewer
// than the quorum of all the nodes held h's token (live on the node's
// clock) as the call began: a node that failed is no excuse (the library
// says "not confirmed" when failed nodes leave the count open), leaving
// out a node that
// restarted or whose clock stepped while the call ran (it may have lost
// the key before the request reached it: see Sim.unfaulted). A node a release reached twice
// (resent after its reply was lost) and found another's token on at its
// return did not answer either: its first try freed the key, another took
// it, and the resend, whose answer the library read, found it another's;
// only the first try's answer (lost) could tell, and a "gone" resend is
// still judged (the library must count it, see Mutex.Unlock). A lease given up for a node's clock jump (the
// error wraps ErrClockJump) is excused once some node's clock stepped or
// it restarted: the guard cannot tell a jump that kept the key from one
// that expired it, and says "may no longer be held" so.
func (h *history) notHeldUntrue(v verdict) string {
	x := v.hold
	if v.clockJump && h.faultedBefore(v.ret) {
		// The lease was given up for a node's clock jump, which the
		// guard cannot tell from the key expiring early there: "not
		// held" is its word for "may no longer be held" (ALGORITHM.md,
		// the clock guard), true only as that.
		return ""
	}
	if v.ret.Before(v.until) && v.held >= v.quorum {
		return fmt.Sprintf("%s: %s's %s at %v said not held, but %d nodes (%d in all, %d of them failed, %d resent; quorum %d) held its token, valid until %v: %s",
			x.res, x.who, v.op, h.at(v.call), v.held, v.heldAll, v.failed, v.resent, v.quorum, h.at(v.until), v.err)
	}
	return ""
}

// extendUntrue checks an Extend that returned nil. It says a quorum of
// nodes holds h's token until the Until it returned, on the true clock:
// when it returned, the token's entry on each counted node (its key's TTL;
// a reader's or a permit's own expiry) reached that Until or beyond. A
// node that restarted or whose clock stepped from the call to its return
// counts (a fault the model accepts); after the return, only such faults
// and a deletion by another client (which overlaps find) can take the
// token from a node before Until.
func (h *history) extendUntrue(v verdict) string {
	x := v.hold
	if v.held < v.quorum {
		return fmt.Sprintf("%s: %s's %s at %v returned nil, until %v, but %d nodes (quorum %d) held its token that long", x.res, x.who, v.op,
			h.at(v.call), h.at(v.until), v.held, v.quorum)
	}
	return ""
}

// refusalUntrue checks a TryLock refusal that says the lock is held by
// another (see heldElsewhere). It says a competitor held a quorum when it
// was made: when the call returned, a token of another client was live on
// a quorum of nodes; or one was on each of a quorum of nodes at some
// instant of the call, not all at one (Sim.sight: an attempt whose keys
// stood on a quorum, then failed, its fence round or its validity, and
// undid them, this client's own earlier attempt included; a key handed over to a waiter that gave up on some nodes
// while others were handed over still: each node answers at its own
// instant); or (a competitor that released meanwhile) a hold of another
// client, from its attempt to its release's return, spans part of the
// call. One token on a quorum, not any overlapping attempt: attempts that
// split a free lock among them, each refused as held by another, are the
// bug it catches.
func (h *history) refusalUntrue(v verdict, hs []hold) string {
	x := v.hold
	if v.held >= v.quorum || h.sightedBetween(x.res, x.client, v.quorum, v.call, v.ret) || slices.ContainsFunc(hs, func(o hold) bool {
		return o.client != x.client && o.attempt.Before(v.ret) && o.freed.After(v.call) && excludes(x, o)
	}) {
		return ""
	}
	return fmt.Sprintf("%s: %s's %s at %v-%v was refused as held by another, but no other client held a quorum (%d nodes at most, quorum %d): %s",
		x.res, x.who, v.op, h.at(v.call), h.at(v.ret), v.held, v.quorum, v.err)
}

// faultedBefore reports whether some node's clock stepped, or it
// restarted, before t. Called with h.mu held.
func (h *history) faultedBefore(t time.Time) bool {
	for _, ts := range h.faults {
		if len(ts) > 0 && ts[0].Before(t) {
			return true
		}
	}
	return false
}

// excludes reports whether holds x and o may not be in force together
// (permits: one of the limit's).
func excludes(x, o hold) bool {
	return x.kind == permit && o.kind == permit || x.kind != permit && o.kind != permit && (x.kind == exclusive || o.kind == exclusive)
}

// crowded returns the most holds of in in force at one instant from
// `from` to to.
func (h *history) crowded(in []hold, from, to time.Time) int {
	most := 0
	for _, a := range in {
		at := maxTime(a.start, from)
		n := 0
		for _, o := range in {
			if !o.start.After(at) && o.end.After(at) && at.Before(to) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// earlyWithin reports whether a node came back empty sooner than a TTL
// (see wiped) from `from` to to. Called with h.mu held.
func (h *history) earlyWithin(from, to time.Time) bool {
	return slices.ContainsFunc(h.early, func(t time.Time) bool { return !t.Before(from) && !t.After(to) })
}

// beside returns the holds of hs other than x that were in force in x's
// window, up to end, and exclude x.
func beside(x hold, end time.Time, hs []hold) []hold {
	var in []hold
	for _, o := range hs {
		if (o.client != x.client || !o.start.Equal(x.start)) && o.start.Before(end) && o.end.After(x.start) && excludes(x, o) {
			in = append(in, o)
		}
	}
	return in
}
