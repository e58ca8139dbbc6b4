package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The algorithm: send a request to every node at once, collect the votes,
// decide as soon as the outcome is certain, and release what a failed
// acquisition may have taken. It reads top to bottom: acquire and its
// rules, the rounds of fence, release and extend, then the pieces they rest
// on (the vote loop, the per-node gate, the tally).

// quorum is the number of nodes that make a majority of n. Any two sets of
// quorum(n) nodes intersect, so two holders can never both have a quorum.
func quorum(n int) int { return n/2 + 1 }

// acquisition is what a successful acquire leaves for later calls on the
// same lease, or what a failed one says about itself.
type acquisition struct {
	start, until time.Time // the attempt's start, and the validity's end
	// gates order the lease's later requests on each node after its
	// acquire requests there (see gate).
	gates []*gate
	// fence is the acquisition's fencing token (0 when not fenced).
	fence uint64
	// granted, took and yielded describe a failed attempt: how many nodes
	// granted it when it was decided, how long it took, and whether it gave
	// way to a competitor that ranks higher (see outranks).
	granted int
	took    time.Duration
	yielded bool
	// hopeless is set when so many nodes failed with errors no retry can
	// change (ErrMisconfigured) that no quorum is left to grant.
	hopeless bool
}

// Re-asking: an attempt that split the nodes with competitors and ranks
// first among them asks the nodes they hold again, up to maxReasks times
// each, at growing intervals starting from about one round trip to the
// nodes that answered: the competitors give way (see outranks) and release
// them.
const maxReasks = 3

// acquire makes one attempt to take the lock on a quorum.
//
//  1. Note the start on the monotonic clock.
//  2. Send the acquire request (a script, like SET key token NX GET PX ttl)
//     to every node at once; a node that is down is skipped, and one that
//     has not answered by the node timeout counts as failed.
//  3. Decide as soon as the outcome is certain: a quorum granted, a quorum
//     can no longer grant, or a competitor ranks higher (the split-vote
//     rule: see outranks). While this attempt ranks first among those that
//     split the nodes, the nodes its competitors hold count as "may still
//     grant": it asks them again once the competitors had time to give way.
//  4. Succeed only with a quorum AND validity left: the window ends at
//     start + ttl - drift, whatever the attempt cost (a node asked again
//     set its key later, so it expires later still).
//  5. Otherwise release on every node where the attempt may have set the
//     key (see mustUndo), each once its own acquire requests have returned
//     (see gate), so that a release never overtakes the SET it undoes.
//
// On failure the caller waits, at most a node timeout, for the releases of
// the nodes that had granted when the outcome was decided, so that those
// hold nothing of the attempt once it returns; the others, and all of them
// when ctx has ended, finish in the background. Releases never use the
// caller's cancellation: cleanup must happen even after ctx is done.
//
// gates are the lease's when this is one more hold of a reentrant lock,
// nil for a new acquisition. reasks bounds how many times a node may be
// asked again (see maxReasks): Lock's attempts ask again, TryLock's single
// attempt does not, so that a caller that tries in a loop gets a quick
// answer every time. released, when not "", is a token whose
// release was just announced: a node may still hold it because the
// announcement from a faster node arrived first, so its refusals count as
// "may still grant" and the attempt never gives way to it.
func (r *Redlock) acquire(ctx context.Context, req *acquireReq, cfg *config, gates []*gate, released string, reasks int) (acquisition, error) {
	if err := r.track(1); err != nil {
		return acquisition{}, err
	}
	defer r.wg.Done()
	if err := r.startIdentify(); err != nil {
		return acquisition{}, err
	}
	start := r.now()
	if gates == nil {
		gates = newGates(len(r.peers))
	}
	a := newAttempt(r, ctx, req, cfg, gates, start)
	a.released, a.reasks = released, reasks
	for i := range r.peers {
		a.ask(i)
	}
	ctxErr := a.rd.collect(ctx, a)
	t := a.rd.t
	until := validUntil(start, cfg.ttl, cfg.driftFactor)
	var idErr error
	if ctxErr == nil && t.won() {
		// Two of the nodes that granted must not be the same server.
		idErr = r.identified(start, start.Add(cfg.nodeTimeout))
	}
	if ctxErr == nil && idErr == nil && t.won() && r.now().Before(until) {
		acq := acquisition{start: start, until: until, gates: gates}
		if req.fenceKey == "" || req.reenter {
			return acq, nil
		}
		return r.fence(ctx, req, acq, a, cfg, start)
	}
	undo := undoRequest(req)
	wait := a.granted() // nodes that surely hold the token now
	rel := r.releaseRound(ctx, undo, gates, cfg, a.mustUndo)
	if ctxErr == nil {
		rel.waitFor(wait, cfg.nodeTimeout)
	}
	took := r.now().Sub(start)
	failed := acquisition{granted: t.yes, took: took, yielded: a.yielded, hopeless: t.hopeless()}
	if idErr != nil {
		return failed, idErr
	}
	reason := fmt.Sprintf("%d of %d nodes granted, quorum %d", t.yes, t.n, t.quorum)
	switch {
	case failed.hopeless:
		reason += fmt.Sprintf("; misconfigured nodes: %d, too many for a quorum to grant until they are fixed", t.misconfigured())
	case a.yielded:
		reason += fmt.Sprintf(", gave way to a competitor holding %d", a.rival)
	case t.won():
		reason = fmt.Sprintf("quorum granted after %v, no validity left of ttl %v", took, cfg.ttl)
	}
	return failed, t.err(ErrNotAcquired, reason, ctxErr)
}

// undoRequest is the release that undoes an acquisition of req on a node.
// It frees nothing anyone waits for: it announces nothing.
func undoRequest(req *acquireReq) *releaseReq {
	return &releaseReq{key: req.key, token: req.token, reentrant: req.reentrant, drop: dropUndo}
}

// mustUndo is step 5's rule: whether an attempt that failed must release a
// node that gave rep to one of its acquire requests. A node that granted
// holds the token. A node that refused (held by another value) does not. A
// request that surely was not applied (never sent, node skipped as down,
// connection not dialled, node recovering from a restart) set nothing. Any
// other failure (a timeout, a lost reply) may hide an applied SET, so it is
// released too, except for a reentrant lock: its undo drops one hold of
// the owner, which on a node the attempt never reached would be a hold the
// owner already had. An extra hold left on a node is harmless: the owner's
// last Unlock drops them all.
func mustUndo(rep reply, reentrant bool) bool {
	switch {
	case rep.ok:
		return true
	case rep.err == nil, unsent(rep.err):
		return false
	}
	return !reentrant
}

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

// attempt is one acquire in progress: the votes so far, what they say of
// competitors, and the re-asks scheduled.
type attempt struct {
	r     *Redlock
	ctx   context.Context //nolint:containedctx // the caller's values, for the requests it sends
	req   *acquireReq
	cfg   *config
	gates []*gate
	rd    *round

	mu   sync.Mutex // guards held: written by node callbacks
	held []bool     // per node: some request may have set the key (mustUndo)

	// Owned by the vote loop.
	holders  []string       // per refusing node: the value holding the key
	seen     map[string]int // holder → refusing nodes
	asked    []int          // per node: acquire requests sent
	inflight []bool         // per node: a re-ask awaits its reply
	reask    *time.Timer
	gap      time.Duration // until the next re-ask
	yielded  bool
	rival    int    // nodes held by the competitor given way to
	released string // a token being released: see acquire
	reasks   int    // how many times a node may be asked again
}

func newAttempt(r *Redlock, ctx context.Context, req *acquireReq, cfg *config, gates []*gate, start time.Time) *attempt {
	n := len(r.peers)
	return &attempt{
		r: r, ctx: context.WithoutCancel(ctx), req: req, cfg: cfg, gates: gates,
		rd:   newRound(r, start, cfg.nodeTimeout, n*(1+maxReasks)),
		held: make([]bool, n), holders: make([]string, n), asked: make([]int, n), inflight: make([]bool, n),
	}
}

// ask sends the acquire request to node i, once the node's earlier
// acquire requests of the same lease have returned.
func (a *attempt) ask(i int) {
	a.asked[i]++
	again := a.asked[i] > 1
	g, p := a.gates[i], a.r.peers[i]
	g.then(func() {
		g.enter()
		p.send(a.ctx, a.cfg.nodeTimeout, a.cfg.observer, a.req, func(rep reply) {
			if mustUndo(rep, a.req.reentrant) {
				a.mu.Lock()
				a.held[i] = true
				a.mu.Unlock()
			}
			a.rd.votes <- vote{node: i, rep: rep, again: again}
			g.leave()
		})
	})
}

// mustUndo reports whether node i must be released after a failed
// attempt. It is called once every acquire request to node i returned.
func (a *attempt) mustUndo(i int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held[i]
}

// granted returns the nodes that had granted when the attempt was decided.
func (a *attempt) granted() []int {
	var out []int
	for i, ans := range a.rd.t.answers {
		if ans == granted {
			out = append(out, i)
		}
	}
	return out
}

// take counts a vote and reports whether the outcome is certain.
func (a *attempt) take(v vote) bool {
	t := a.rd.t
	i := v.node
	if v.again {
		a.inflight[i] = false
		if v.rep.ok && v.rep.err == nil && t.answers[i] == refused {
			t.regrant(i)
			a.seen[a.holders[i]]--
		}
	} else {
		t.add(i, v.rep.ok, a.rd.nodeErr(i, v.rep.err))
		if t.answers[i] == refused {
			if a.seen == nil {
				a.seen = map[string]int{}
			}
			a.holders[i] = v.rep.holder
			a.seen[v.rep.holder]++
			if v.rep.holder != "" && v.rep.holder == a.released {
				// The release of that token is on its way to this node
				// (another node's announcement came first): ask again at
				// once; it lands before the request does, as a rule.
				a.inflight[i] = true
				a.ask(i)
			}
		}
	}
	return a.judge()
}

// judge decides the attempt if it can. Once the attempt split the nodes
// with a competitor, it sets the re-ask timer: the split-vote rule is
// applied when it fires (see tick), about one round trip later, so that
// nodes a few microseconds behind are not taken for slow ones; it sets it
// again while the nodes its competitors hold may still grant (see soft).
func (a *attempt) judge() bool {
	t := a.rd.t
	if t.won() {
		return true
	}
	split := t.yes > 0 && t.refused > 0
	if split && t.pending() == 0 && a.outranked() {
		return true // every node answered: nothing to wait for
	}
	soft := a.soft()
	if t.yes+t.pending()+len(soft) < t.quorum {
		return true // lost, even if every competitor gave way
	}
	if a.reask == nil && (len(soft) > 0 || split && a.gap == 0) {
		if a.gap == 0 {
			// The nodes that answered took about the time so far: give
			// the others as long again before taking them for slow ones.
			// When all answered, competitors that are outranked give way
			// at once, and one round trip lets their releases land.
			wait := 2 * a.r.now().Sub(a.rd.start)
			if t.pending() == 0 {
				wait /= 2
			}
			a.gap = min(max(wait, 100*time.Microsecond), a.cfg.nodeTimeout/10)
		}
		a.reask = time.NewTimer(a.gap)
		a.gap *= 2
	}
	return false
}

// soft returns the refusing nodes that may still grant, with re-asks left:
// held by a competitor that holds no more nodes than this attempt (it may
// give way), or by the token whose release was announced. Only an attempt
// with grants asks a competitor's nodes again; one without is not
// splitting anything.
func (a *attempt) soft() []int {
	t := a.rd.t
	if t.yes == 0 && a.released == "" {
		return nil
	}
	var out []int
	for i, ans := range t.answers {
		h := a.holders[i]
		releasing := h != "" && h == a.released
		if ans == refused && (releasing || t.yes > 0 && a.seen[h] <= t.yes) && (a.inflight[i] || a.asked[i] <= a.reasks) {
			out = append(out, i)
		}
	}
	return out
}

// timer returns the re-ask timer's channel, nil when none is set.
func (a *attempt) timer() <-chan time.Time {
	if a.reask == nil {
		return nil
	}
	return a.reask.C
}

// tick applies the split-vote rule: the attempt gives way to a
// competitor that outranks it, or else asks the nodes its competitors hold
// again.
func (a *attempt) tick() bool {
	a.reask = nil
	if a.outranked() {
		return true
	}
	for _, i := range a.soft() {
		if !a.inflight[i] {
			a.inflight[i] = true
			a.ask(i)
		}
	}
	return a.judge()
}

// outranked reports whether a competitor outranks this attempt, and if so
// records that the attempt gives way to it.
func (a *attempt) outranked() bool {
	t := a.rd.t
	for h, n := range a.seen {
		if n > 0 && h != a.released && outranks(n, h, t.yes, a.req.token) {
			a.yielded, a.rival = true, n
			return true
		}
	}
	return false
}

// stop ends the re-asks when the vote loop returns.
func (a *attempt) stop() {
	if a.reask != nil {
		a.reask.Stop()
	}
}

// fence gives acquisition acq, which a quorum granted, its fencing token:
// one more than the highest counter read from the nodes that answered the
// acquisition, written to every node, where the counter only grows. The
// acquisition succeeds when a quorum still held the lock as the token was
// written and validity is left; otherwise it is released on every node.
//
// Why the token exceeds that of every acquisition B that succeeded before
// this one began: B's token reached a quorum of nodes that held B's lock as
// it was written; this acquisition was granted by a quorum; the two share a
// node. There the grant came after B's key was gone, so after B's token
// was written, and the counter read with the grant is at least B's token,
// unless that node lost its data in between (see the package documentation).
func (r *Redlock) fence(ctx context.Context, req *acquireReq, acq acquisition, a *attempt, cfg *config, start time.Time) (acquisition, error) {
	highest := a.rd.highestCounter()
	commit := &fenceReq{key: req.key, token: req.token, fenceKey: req.fenceKey, fence: highest + 1, reentrant: req.reentrant}
	release := func() { r.releaseRound(ctx, undoRequest(req), acq.gates, cfg, nil).waitFor(nil, 0) }
	if commit.fence >= maxFence {
		release()
		return acquisition{}, fmt.Errorf("%w: fencing counter %d is at its limit", ErrNotAcquired, highest)
	}
	rd := r.round(ctx, acq.gates, cfg, commit, nil)
	ctxErr := rd.collect(ctx, rd)
	ft := rd.t
	if ctxErr == nil && ft.won() && r.now().Before(acq.until) {
		// Wait for the nodes about as fast as the quorum, as Unlock does when someone waits:
		// the more nodes know the token when TryLock returns, the more of
		// them may later lose their data (see the package documentation).
		rd.linger(r.now().Sub(rd.start))
		acq.fence = commit.fence
		return acq, nil
	}
	// Released on every node, the grants included: a token recorded on too
	// few nodes could be overtaken by a later holder's.
	release()
	took := r.now().Sub(start)
	reason := fmt.Sprintf("fencing token %d recorded on %d of %d nodes holding the lock, quorum %d", commit.fence, ft.yes, ft.n, ft.quorum)
	if ft.won() {
		reason = fmt.Sprintf("fencing token recorded after %v, no validity left of ttl %v", took, cfg.ttl)
	}
	return acquisition{took: took}, ft.err(ErrNotAcquired, reason, ctxErr)
}

// releaseRound sends req to every node, each once its gate opens, where
// only(i) allows (nil: every node). A release that could not be delivered
// is owed to its node (see health.go). The round's votes say where the
// token was found.
func (r *Redlock) releaseRound(ctx context.Context, req *releaseReq, gates []*gate, cfg *config, only func(int) bool) *round {
	return r.round(ctx, gates, cfg, req, only)
}

// release runs a release round and reports whether a quorum still held
// the token. Nodes that have not answered when the outcome is certain
// finish in the background.
//
// A node that answers, before until (the lease's validity end), that the
// key is absent counts as holding the token when the server that answered
// is the one it was known to be before the lease began (since): within the
// validity the key cannot have expired, no one else can have taken it, and
// that server did not restart (a restart, or a failover to a replica,
// changes the run id), so an earlier try of this same release deleted it,
// one the client resent when its reply was lost (go-redis retries a
// command whose reply timed out). Zero until counts no absent key (a
// reentrant Unlock that drops one hold never deletes the key, so its
// absence is no resend).
func (r *Redlock) release(ctx context.Context, req *releaseReq, gates []*gate, cfg *config, since, until time.Time) error {
	if err := r.track(1); err != nil {
		return err
	}
	defer r.wg.Done()
	rd := r.releaseRound(ctx, req, gates, cfg, nil)
	rd.goneSince, rd.goneUntil = since, until
	ctxErr := rd.collect(ctx, rd)
	t := rd.t
	waited := req.channel != "" && (rd.heard.Load() || r.waiters.waiting(req.key))
	if waited {
		// Waiters heard the release: this process's next Lock on the
		// name lets them go first (see Redlock.yieldTo).
		r.yieldTo(req.key, r.now().Sub(rd.start))
	}
	if ctxErr == nil && t.won() {
		if waited {
			// Nodes that answer about as fast as the quorum did are
			// waited for, up to as long again: the lock is then free
			// everywhere when Unlock returns, and the waiter that takes
			// it next does not find it still held on a node a few
			// microseconds behind. A slow node is not waited for. With no
			// one waiting, Unlock returns at the quorum (a quarter of an
			// uncontended lock+unlock pair is that wait).
			rd.linger(r.now().Sub(rd.start))
		}
		return nil
	}
	return t.err(ErrNotHeld, fmt.Sprintf("token found on %d of %d nodes, quorum %d", t.yes, t.n, t.quorum), ctxErr)
}

// extend runs the extend request on every node and reports whether a
// quorum still held the token and re-armed its TTL.
func (r *Redlock) extend(ctx context.Context, req *extendReq, gates []*gate, cfg *config) error {
	if err := r.track(1); err != nil {
		return err
	}
	defer r.wg.Done()
	rd := r.round(ctx, gates, cfg, req, nil)
	ctxErr := rd.collect(ctx, rd)
	t := rd.t
	if ctxErr == nil && t.won() {
		return nil
	}
	err := t.err(ErrNotHeld, fmt.Sprintf("extended on %d of %d nodes, quorum %d", t.yes, t.n, t.quorum), ctxErr)
	if t.refused > t.n-t.quorum {
		// A quorum answered that the token is gone. Extend never re-creates
		// a key, so no later extension can succeed: the lock is lost.
		err = errors.Join(err, ErrLockLost)
	}
	return err
}

// vote is one node's reply to one request of a round.
type vote struct {
	node  int
	rep   reply
	again bool // the reply to a re-ask
}

// round is one request sent to every node, and the votes coming back.
// Votes arrive on a buffered channel, large enough for every request the
// round may send: node callbacks never block.
type round struct {
	r       *Redlock
	start   time.Time
	timeout time.Duration
	votes   chan vote
	t       *tally
	// counters holds, in acquire rounds, each node's fencing counter.
	counters []uint64
	// heard is set once a node said its release announcement reached a
	// waiter.
	heard atomic.Bool
	// goneSince and goneUntil, in release rounds, are the lease's start and
	// validity end: until then, a node that found the key absent counts as
	// holding the token if the same server answered (see release).
	goneSince, goneUntil time.Time
}

func newRound(r *Redlock, start time.Time, timeout time.Duration, capacity int) *round {
	return &round{r: r, start: start, timeout: timeout, votes: make(chan vote, capacity), t: newTally(len(r.peers))}
}

// round sends o to every node, each once its gate opens (gates may be
// nil), where only(i) allows (nil: every node); a node left out votes at
// once that it was skipped.
func (r *Redlock) round(ctx context.Context, gates []*gate, cfg *config, o op, only func(int) bool) *round {
	rd := newRound(r, r.now(), cfg.nodeTimeout, len(r.peers))
	values := context.WithoutCancel(ctx)
	rel, _ := o.(*releaseReq)
	for i, p := range r.peers {
		send := func() {
			if only != nil && !only(i) {
				rd.votes <- vote{node: i, rep: reply{err: errSkipped}}
				return
			}
			p.send(values, cfg.nodeTimeout, cfg.observer, o, func(rep reply) {
				if rel != nil && owable(rel, rep.err) {
					p.owe(rel, cfg.ttl)
				}
				if rep.named || rep.heard > 1 || rep.heard == 1 && !r.waiters.listening(i, rel.key) {
					rd.heard.Store(true) // a waiter was named, or another process's waiters heard it
				}
				rd.votes <- vote{node: i, rep: rep}
			})
		}
		if gates == nil {
			send()
		} else {
			gates[i].then(send)
		}
	}
	return rd
}

// errSkipped is the vote of a node a round left out on purpose.
var errSkipped = errors.New("redlock: skipped")

// judge is what the vote loop asks of a round's decision rule.
type judge interface {
	take(v vote) bool        // count a vote; true when the outcome is certain
	timer() <-chan time.Time // an extra wake-up, nil for none
	tick() bool              // the extra wake-up fired; true when certain
	stop()                   // the loop is done
}

// The plain rule of fence, release and extend rounds: a quorum either way.
func (rd *round) take(v vote) bool {
	rd.add(v)
	return rd.t.decided()
}

// add counts v in the tally.
func (rd *round) add(v vote) {
	ok := v.rep.ok || v.rep.gone && rd.r.now().Before(rd.goneUntil) && rd.r.sameServer(v.node, v.rep.server, rd.goneSince)
	rd.t.add(v.node, ok, rd.nodeErr(v.node, v.rep.err))
}
func (rd *round) timer() <-chan time.Time { return nil }
func (rd *round) tick() bool              { return rd.t.decided() }
func (rd *round) stop()                   {}

// collect is the vote loop: it feeds votes to j until the outcome is
// certain, the node timeout passes (every node still silent then counts
// as failed with ErrNodeTimeout, and is reported to its peer), or ctx ends,
// whose error it then returns (joined with its cause).
func (rd *round) collect(ctx context.Context, j judge) error {
	defer j.stop()
	timer := time.NewTimer(rd.timeout - rd.r.now().Sub(rd.start))
	defer timer.Stop()
	for {
		select {
		case v := <-rd.votes:
			rd.counter(v)
			if j.take(v) {
				return nil
			}
		case <-j.timer():
			if j.tick() {
				return nil
			}
		case <-timer.C:
			for i, ans := range rd.t.answers {
				if ans == pending {
					p := rd.r.peers[i]
					p.timedOut(rd.start)
					rd.t.add(i, false, rd.nodeErr(i, p.timeoutErr(rd.start)))
				}
			}
			return nil
		case <-ctx.Done():
			err := ctx.Err()
			if cause := context.Cause(ctx); !errors.Is(err, cause) {
				err = errors.Join(err, cause)
			}
			return err
		}
	}
}

// counter keeps the fencing counter a node's acquire reply carried.
func (rd *round) counter(v vote) {
	if v.rep.err != nil || v.rep.counter == 0 {
		return
	}
	if rd.counters == nil {
		rd.counters = make([]uint64, rd.t.n)
	}
	rd.counters[v.node] = max(rd.counters[v.node], v.rep.counter)
}

// highestCounter is the highest fencing counter read from the nodes that
// answered (granted or refused).
func (rd *round) highestCounter() uint64 {
	var highest uint64
	for _, c := range rd.counters {
		highest = max(highest, c)
	}
	return highest
}

// linger collects the replies still due, for at most d (and never past
// the node timeout), after the outcome was decided.
func (rd *round) linger(d time.Duration) {
	left := rd.t.pending()
	if left == 0 {
		return
	}
	d = min(d, rd.timeout-rd.r.now().Sub(rd.start))
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for rd.t.pending() > 0 {
		select {
		case v := <-rd.votes:
			rd.add(v)
		case <-timer.C:
			return
		}
	}
}

// waitFor waits, at most timeout, for the votes of the given nodes.
func (rd *round) waitFor(nodes []int, timeout time.Duration) {
	if len(nodes) == 0 || timeout <= 0 {
		return
	}
	want := make(map[int]bool, len(nodes))
	for _, i := range nodes {
		want[i] = true
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for len(want) > 0 {
		select {
		case v := <-rd.votes:
			delete(want, v.node)
		case <-timer.C:
			return
		}
	}
}

func (rd *round) nodeErr(i int, err error) error {
	if err == nil {
		return nil
	}
	return &NodeError{Index: i, Addr: rd.r.peers[i].n.addr(), Err: err}
}

// gate orders one node's requests for one lease. Acquire requests enter
// it; releases, extensions, fencing and further acquire requests (a re-ask,
// one more hold of a reentrant lock) go through then, which starts them
// only once every acquire request that entered before has returned. Sent
// on another connection while a SET is still in flight, a release could
// reach the node first, find nothing, and leave the late SET's key behind
// until its TTL. A gate starts requests from the completion of the last
// one, on the node's own goroutine: waiting costs no goroutine.
type gate struct {
	mu      sync.Mutex
	busy    int      // acquire requests in flight
	waiting []func() // started, in order, once busy is 0
}

func newGates(n int) []*gate {
	gs := make([]*gate, n)
	for i := range gs {
		gs[i] = new(gate)
	}
	return gs
}

// enter counts one more acquire request in flight.
func (g *gate) enter() {
	g.mu.Lock()
	g.busy++
	g.mu.Unlock()
}

// leave counts one acquire request done, and starts what waited for it.
func (g *gate) leave() {
	g.mu.Lock()
	g.busy--
	for g.busy == 0 && len(g.waiting) > 0 {
		f := g.waiting[0]
		g.waiting = g.waiting[1:]
		g.mu.Unlock()
		f() // may enter
		g.mu.Lock()
	}
	g.mu.Unlock()
}

// then runs f now if no acquire request is in flight, else once none is.
func (g *gate) then(f func()) {
	g.mu.Lock()
	if g.busy > 0 || len(g.waiting) > 0 {
		g.waiting = append(g.waiting, f)
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	f()
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

// tally counts the answers of one round and knows when the outcome is
// certain.
type tally struct {
	n, quorum int
	yes, no   int // granted, and refused or failed
	refused   int // answered no, without error
	answers   []answer
	nodeErrs  []error
}

func newTally(n int) *tally {
	return &tally{n: n, quorum: quorum(n), answers: make([]answer, n)}
}

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
		t.nodeErrs = append(t.nodeErrs, err)
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
	for _, err := range t.nodeErrs {
		if errors.Is(err, ErrMisconfigured) {
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

func (t *tally) decided() bool { return t.won() || t.lost() }

// err builds the error of a failed operation: sentinel, the reason, the
// context's error when it ended, and one *NodeError per failed node.
func (t *tally) err(sentinel error, reason string, ctxErr error) error {
	errs := make([]error, 0, 2+len(t.nodeErrs))
	errs = append(errs, fmt.Errorf("%w: %s", sentinel, reason))
	if ctxErr != nil {
		errs = append(errs, ctxErr)
	}
	errs = append(errs, t.nodeErrs...)
	return errors.Join(errs...)
}
