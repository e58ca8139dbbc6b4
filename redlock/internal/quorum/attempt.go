package quorum

import (
	"context"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// The acquire rule: one attempt to take a lock on a quorum, with the
// split-vote rule that lets contenders who split the free nodes sort
// themselves out without waiting for slow nodes.

// MaxReasks bounds re-asking: an attempt that split the nodes with
// competitors and ranks first among them asks the nodes they hold again,
// up to MaxReasks times
// each, at growing intervals starting from about one round trip to the
// nodes that answered: the competitors give way (see outranks) and release
// them.
const MaxReasks = 3

// outranks is the split-vote rule. When contenders split the free nodes
// between them, none may reach a quorum without the nodes that have not
// answered yet, which may be slow, far or down. Each attempt knows its own
// grants and, from the refusals (SET ... NX GET returns the value that
// holds the key), how many of the nodes that answered it each competitor
// holds. An attempt gives way as soon as a competitor outranks it: holds
// more nodes, or as many with a greater token. It then releases its grants
// and waits for the next release, while the competitor that ranks first
// asks those nodes again and completes its quorum without waiting for the
// slow ones. Safety does not depend on this rule: giving way is failing,
// which is always safe, and a quorum still needs a majority.
func outranks(theirs int, their string, ours int, our string) bool {
	return theirs > ours || theirs == ours && their > our
}

// mustUndo is the rule for releasing after a failed attempt: whether a
// node that gave rep to one of its acquire requests may hold its token. A
// node that granted does. A node that refused (held by another value) does
// not. A request that surely was not applied (never sent, node skipped as
// down, connection not dialled, node recovering from a restart) set
// nothing. Any other failure (a timeout, a lost reply) may hide an applied
// SET, so it is released too, except for one more hold of a reentrant
// lock's owner (node.HoldsAgain): its undo drops one hold, which on a node
// the attempt never reached would be a hold the owner already had. An
// extra hold left on a node is harmless: the owner's last Unlock drops
// them all.
func mustUndo(rep node.Reply, again bool) bool {
	switch {
	case rep.OK && rep.Err == nil:
		return true
	case rep.Err == nil, node.Unsent(rep.Err):
		return false
	}
	return !again
}

// Attempt is one acquire in progress: the votes so far, what they say of
// competitors, and the re-asks scheduled. It is the rule of its round:
// with split set, the split-vote rule (a lock's attempt, whose refusals
// name the holder); otherwise a plain count, decided as soon as a quorum
// granted or no quorum can (a semaphore's permits, a name's readers).
type Attempt struct {
	rd    *Round
	op    node.Op
	token string // what op sets, ranked against the competitors'
	gates []*Gate
	Split bool
	again bool // op holds again: an undo drops one hold (see mustUndo)

	mu   sync.Mutex // guards held: written by node callbacks
	held []uint8    // per node: mayHold (see mustUndo) and granted bits

	// Owned by the vote loop.
	counters rivals
	asked    []int  // per node: acquire requests sent
	inflight []bool // per node: a re-ask awaits its reply
	reask    *time.Timer
	gap      time.Duration // until the next re-ask
	GaveWay  bool
	Rival    int    // nodes held by the competitor given way to
	released string // a token being released: its holds count as about to go
	reasks   int    // how many times a node may be asked again
	Highest  uint64 // the highest fencing counter read

	// The handoffs heard (see HearHandoffs): nil channel for none.
	handoffs <-chan node.Handed
	mayVote  func(node.Handed) bool
	handedTo []bool // per node: handed the lock over to the token
	Strays   []node.Handed
}

// rivals is what the refusals of an attempt say of its competitors.
type rivals struct {
	holders []string       // per refusing node: the value holding the key
	seen    map[string]int // holder → refusing nodes
}

// NewAttempt prepares an attempt of op, which sets token, over rd;
// nothing is sent yet.
func NewAttempt(rd *Round, op node.Op, token string, gates []*Gate, split bool, released string, reasks int) *Attempt {
	n := rd.p.Size()
	a := &Attempt{
		rd: rd, op: op, token: token, gates: gates, Split: split, again: node.HoldsAgain(op), released: released, reasks: reasks,
		held: make([]uint8, n), asked: make([]int, n), inflight: make([]bool, n),
		counters: rivals{holders: make([]string, n)},
	}
	rd.Hook = a
	return a
}

// The bits of Attempt.held.
const (
	mayHold uint8 = 1 << iota // some request may have set the key (mustUndo)
	granted                   // a request was granted, the clock guard agreeing
)

// Heard notes, on the node's goroutine, that node i may hold the token,
// and whether it granted it, in time for the decision or after it.
func (a *Attempt) Heard(i int, rep node.Reply) {
	if !mustUndo(rep, a.again) {
		return
	}
	a.mu.Lock()
	a.held[i] |= mayHold
	if rep.OK && rep.Err == nil {
		a.held[i] |= granted
	}
	a.mu.Unlock()
}

// Granted reports whether node i granted the attempt, before its
// decision or since: a grant that came after a won attempt's decision
// holds the token as long as the voters' (it was set after the attempt
// began), though it did not count.
func (a *Attempt) Granted(i int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held[i]&granted != 0
}

// ask sends the acquire request to node i, once the node's earlier
// acquire requests of the same lease have returned.
func (a *Attempt) ask(i int) {
	a.asked[i]++
	a.rd.Post(i, a.op, a.gates[i], nil, a.asked[i] > 1, true)
}

// MayHold reports whether node i must be released after a failed
// attempt. It is called once every acquire request to node i returned.
func (a *Attempt) MayHold(i int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held[i]&mayHold != 0
}

// Take counts a vote and reports whether the outcome is certain.
func (a *Attempt) Take(v Vote) bool {
	t := a.rd.Tally
	if !a.Split {
		a.rd.Add(v)
		return t.decided()
	}
	i := v.node
	g := node.GrantOf(v.rep)
	if v.rep.Err == nil {
		a.Highest = max(a.Highest, g.Counter)
	}
	if v.again {
		a.inflight[i] = false
		if v.rep.OK && v.rep.Err == nil && t.Answers[i] == refused {
			t.regrant(i)
			a.counters.seen[a.counters.holders[i]]--
		}
		return a.judge()
	}
	a.rd.Add(v)
	if t.Answers[i] == refused {
		a.refusedBy(i, g.Holder)
		if a.handedTo != nil && a.handedTo[i] {
			a.countHanded(i)
		}
	}
	return a.judge()
}

// refusedBy notes that holder holds node i.
func (a *Attempt) refusedBy(i int, holder string) {
	if a.counters.seen == nil {
		a.counters.seen = map[string]int{}
	}
	a.counters.holders[i] = holder
	a.counters.seen[holder]++
	if holder != "" && holder == a.released && a.handoffs == nil {
		// The release of that token is on its way to this node (another
		// node's announcement came first): ask again at once; it lands
		// before the request does, as a rule. An attempt that hears
		// handoffs waits for the node's instead (see awaits).
		a.inflight[i] = true
		a.ask(i)
	}
}

// awaits reports whether the attempt waits for node i's handoff rather
// than ask it again: it hears handoffs, and the node refused it naming
// the token whose release handed it the lock elsewhere, on its way to
// this node too. A re-ask would cost a round trip more than the handoff,
// and a node near the waiter would refuse every re-ask before the release
// reached it.
func (a *Attempt) awaits(i int) bool {
	h := a.counters.holders[i]
	return a.handoffs != nil && a.rd.Tally.Answers[i] == refused && h != "" && h == a.released
}

// judge decides the attempt if it can. Once the attempt split the nodes
// with a competitor, it sets the re-ask timer: the split-vote rule is
// applied when it fires (see tick), about one round trip later, so that
// nodes a few microseconds behind are not taken for slow ones; it sets it
// again while the nodes its competitors hold may still grant (see soft).
func (a *Attempt) judge() bool {
	t := a.rd.Tally
	if t.Won() {
		return true
	}
	split := t.Yes > 0 && t.refused > 0
	if split && t.Pending() == 0 && a.outranked() {
		return true // every node answered: nothing to wait for
	}
	soft := a.soft()
	if t.short(t.no-len(soft)) && a.told() {
		return true // lost, even if every competitor gave way
	}
	if a.reask == nil && (len(soft) > 0 || split && a.gap == 0) {
		a.schedule()
	}
	return false
}

// told reports whether a lost attempt knows what refused it (see
// engine.class): a plain count always does; a lock's attempt once one
// competitor holds a quorum, or none can with the nodes that have not
// answered. Until then it waits for them (the node timeout at most): two
// refusals by different holders, the third node's answer pending, are a
// split, or a lock held on the first and third nodes.
func (a *Attempt) told() bool {
	if !a.Split {
		return true
	}
	t := a.rd.Tally
	most := a.Strongest()
	return most >= t.Majority || most+t.Pending() < t.Majority
}

// schedule sets the re-ask timer. The first time, the nodes that answered
// took about the time so far: the others get as long again before they
// are taken for slow ones. When all answered, competitors that are
// outranked give way at once, and one round trip lets their releases land.
func (a *Attempt) schedule() {
	if a.gap == 0 {
		wait := 2 * a.rd.p.now().Sub(a.rd.Start)
		if a.rd.Tally.Pending() == 0 {
			wait /= 2
		}
		a.gap = min(max(wait, graceMin), a.rd.timeout/10)
	}
	a.reask = time.NewTimer(a.gap)
	a.gap *= 2
}

// soft returns the refusing nodes that may still grant, with re-asks left
// (or a handoff awaited, see awaits): held by a competitor that holds no
// more nodes than this attempt (it may give way), or by the token whose
// release was announced. Only an attempt
// with grants asks a competitor's nodes again; one without is not
// splitting anything.
func (a *Attempt) soft() []int {
	t := a.rd.Tally
	if t.Yes == 0 && a.released == "" {
		return nil
	}
	var out []int
	for i, ans := range t.Answers {
		h := a.counters.holders[i]
		releasing := h != "" && h == a.released
		if ans == refused && (releasing || t.Yes > 0 && a.counters.seen[h] <= t.Yes) && (a.inflight[i] || a.asked[i] <= a.reasks || a.awaits(i)) {
			out = append(out, i)
		}
	}
	return out
}

// Timer returns the re-ask timer's channel, nil when none is set.
func (a *Attempt) Timer() <-chan time.Time {
	if a.reask == nil {
		return nil
	}
	return a.reask.C
}

// Tick applies the split-vote rule: the attempt gives way to a
// competitor that outranks it, or else asks the nodes its competitors hold
// again.
func (a *Attempt) Tick() bool {
	a.reask = nil
	if a.outranked() {
		return true
	}
	for _, i := range a.soft() {
		if !a.inflight[i] && !a.awaits(i) {
			a.inflight[i] = true
			a.ask(i)
		}
	}
	return a.judge()
}

// outranked reports whether a competitor outranks this attempt, and if so
// records that the attempt gives way to it.
func (a *Attempt) outranked() bool {
	t := a.rd.Tally
	for h, n := range a.counters.seen {
		if n > 0 && h != a.released && outranks(n, h, t.Yes, a.token) {
			a.GaveWay, a.Rival = true, n
			return true
		}
	}
	return false
}

// Strongest is the most nodes that one competitor was seen to hold (a
// token whose release was announced aside, see refusedBy): a quorum of
// them, and the lock is held by another.
func (a *Attempt) Strongest() int {
	most := 0
	for h, n := range a.counters.seen {
		if h != a.released || h == "" {
			most = max(most, n)
		}
	}
	return most
}

// HearHandoffs makes the attempt count the handoffs that arrive on ch,
// during its vote loop and after it (see Drain): a waiter's attempt with
// the token that releases hand the lock over to (see
// redlock/internal/turn/handoff.go). mayVote says whether the clock guard
// lets a handoff count as a vote.
func (a *Attempt) HearHandoffs(ch <-chan node.Handed, mayVote func(node.Handed) bool) {
	a.handoffs, a.mayVote = ch, mayVote
	a.handedTo = make([]bool, len(a.held))
}

// Handoffs implements Rule.
func (a *Attempt) Handoffs() <-chan node.Handed { return a.handoffs }

// Handoff implements Rule: it counts h (see handedOver) and judges.
func (a *Attempt) Handoff(h node.Handed) bool {
	a.handedOver(h)
	return a.judge()
}

// Drain counts the handoffs that came since the vote loop returned,
// without waiting for more: a failed attempt may win with them, and its
// undo covers the nodes they came from.
func (a *Attempt) Drain() {
	for {
		select {
		case h := <-a.handoffs:
			a.handedOver(h)
		default:
			return
		}
	}
}

// handedOver notes that node h.Node handed the lock over to h.Token (a
// release popped the waiter the token is registered for). The node holds
// the token from then on, so a failed attempt's undo releases it. When
// the node refused the attempt, naming another holder, it counts as a
// grant (see countHanded): the node applies its requests of one name in
// order, so it handed the lock over after the attempt's request reached
// it, after the attempt's start, and the key expires no sooner than a
// grant to the attempt would. A refusal that comes after the handoff
// counts when it comes (see Take). A handoff of another token (not this
// attempt's: cannot happen while the waiter's token is the attempt's) is
// kept in Strays, for the caller to release.
func (a *Attempt) handedOver(h node.Handed) {
	if h.Token != a.token {
		a.Strays = append(a.Strays, h)
		return
	}
	i := h.Node
	a.mu.Lock()
	a.held[i] |= mayHold
	a.mu.Unlock()
	if !a.mayVote(h) {
		return
	}
	a.handedTo[i] = true
	a.countHanded(i)
}

// countHanded turns node i's refusal into a grant, the node having handed
// the lock over to the token since. A refusal that named the token
// itself is not turned (a hand-over from before the request, which a
// native SET NX refuses: its key was set before the attempt began), nor a
// node that has not answered (it may never apply the request).
func (a *Attempt) countHanded(i int) {
	t := a.rd.Tally
	h := a.counters.holders[i]
	if t.Answers[i] != refused || h == a.token {
		return
	}
	t.regrant(i)
	a.counters.seen[h]--
	a.mu.Lock()
	a.held[i] |= granted
	a.mu.Unlock()
}

// Stop ends the re-asks when the vote loop returns.
func (a *Attempt) Stop() {
	if a.reask != nil {
		a.reask.Stop()
	}
}

// Run sends the attempt to every node and collects the votes until the
// outcome is certain; it returns ctx's error if ctx ended first.
func (a *Attempt) Run(ctx context.Context) error {
	for i := range a.rd.p.Size() {
		a.ask(i)
	}
	return a.rd.Collect(ctx, a)
}
