package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// The algorithm: fan an operation out to every node in parallel, tally the
// answers, decide as soon as the outcome is certain, and clean up after a
// failed acquisition. It reads top to bottom: acquire, then the fan-out it
// rests on, then the tally.

// quorum is the number of nodes that make a majority of n. Any two sets of
// quorum(n) nodes intersect, so two holders can never both have a quorum.
func quorum(n int) int { return n/2 + 1 }

// acquisition is what a successful acquire leaves for later calls on the
// same token.
type acquisition struct {
	until time.Time
	// settled[i] is closed once node i's SET has returned. Release and
	// extend on node i wait for it: sent on another connection while the
	// SET is still in flight, a release could reach the node first, find
	// nothing, and leave the late SET's key behind until its TTL.
	settled []chan struct{}
	// granted and took describe a failed attempt: how many nodes granted it
	// before the outcome was certain, and how long it took. Some grants
	// without a quorum mean the lock was free there and contenders split it.
	granted int
	took    time.Duration
	// fence is the acquisition's fencing token (0 when not fenced).
	fence uint64
}

// acquire makes one attempt to take key on a quorum with a fresh token.
//
//  1. Note the start on the monotonic clock.
//  2. Send SET key token NX PX ttl to every node at once, each bounded by the
//     node timeout.
//  3. Decide as soon as a quorum granted or can no longer grant.
//  4. Succeed only with a quorum AND validity left: the window ends at
//     start + ttl - drift, whatever the attempt cost.
//  5. Otherwise release on every node that did not answer "held by another
//     value": a node that failed or timed out may have applied the SET and
//     lost its reply (only a SET that was surely never sent, such as one
//     whose connection could not be dialled, is not undone). A node still
//     busy with the SET is released right after it answers, so the release
//     cannot overtake the SET it undoes.
//
// On failure the caller waits for the releases of the nodes that had
// granted when the outcome was decided (bounded by the node timeout), so
// those hold no token of the attempt once it returns; releases on nodes that
// failed or had not answered, and all of them when ctx has ended, finish in
// the background. Releases never use the
// caller's cancellation: cleanup must happen even after ctx is done.
//
// after, when not nil, holds per node the SETs of an earlier acquisition of
// the same owner (a reentrant re-lock): each node's call waits for its own.
func (r *Redlock) acquire(ctx context.Context, req *request, cfg *config, after []chan struct{}) (acquisition, error) {
	start := r.now()
	undo := undoRequest(req)
	// counters[i] is node i's fencing counter, written by node i's
	// goroutine before its vote is sent and read only after it arrived.
	var counters []uint64
	if req.fenceKey != "" && !req.reenter {
		counters = make([]uint64, len(r.nodes))
	}
	f, err := r.fanOut(ctx, cfg.nodeTimeout, after,
		func(ctx context.Context, i int, n node) (bool, error) {
			ok, counter, err := n.acquire(ctx, req)
			if counters != nil {
				counters[i] = counter
			}
			return ok, err
		},
		func(ctx context.Context, n node) { _, _ = n.release(ctx, undo) },
		nil, req.reentrant,
	)
	if err != nil {
		return acquisition{}, err
	}
	t := f.wait(ctx)
	until := validUntil(start, cfg.ttl, cfg.driftFactor)
	if t.won() && r.now().Before(until) {
		f.decide(false)
		a := acquisition{until: until, settled: f.settled}
		if counters == nil {
			return a, nil
		}
		return r.fence(ctx, req, a, t, counters, cfg, start)
	}
	f.decide(true)
	if ctx.Err() == nil {
		f.waitUndone(cfg.nodeTimeout)
	}
	reason := fmt.Sprintf("%d of %d nodes granted, quorum %d", t.yes, t.n, t.quorum)
	if t.won() {
		reason = fmt.Sprintf("quorum granted after %v, no validity left of ttl %v", r.now().Sub(start), cfg.ttl)
	}
	return acquisition{granted: t.yes, took: r.now().Sub(start)}, t.err(ErrNotAcquired, reason)
}

// undoRequest is the request that undoes req's acquisition on a node. It
// frees nothing anyone waits for: it publishes nothing.
func undoRequest(req *request) *request {
	undo := *req
	undo.channel, undo.all, undo.undo = "", false, true
	return &undo
}

// fence gives acquisition a, which a quorum granted, its fencing token: one
// more than the highest counter read from the nodes that answered the
// acquisition (t tallies their answers; counters holds what they read),
// written to every node, where the counter only grows. The acquisition
// succeeds when a quorum still held the lock as the token was written and
// validity is left; otherwise it is released on every node.
//
// Why the token exceeds that of every acquisition B that succeeded before
// this one began: B's token reached a quorum of nodes that held B's lock as
// it was written; this acquisition was granted by a quorum; the two share a
// node. There the grant came after B's key was gone, so after B's token
// was written, and the counter read with the grant is at least B's token,
// unless that node lost its data in between (see the package documentation).
func (r *Redlock) fence(ctx context.Context, req *request, a acquisition, t *tally, counters []uint64, cfg *config, start time.Time) (acquisition, error) {
	var highest uint64
	for i, ans := range t.answers {
		if ans == granted || ans == refused {
			highest = max(highest, counters[i])
		}
	}
	commit := *req
	commit.fence = highest + 1
	if commit.fence >= maxFence {
		_ = r.release(ctx, undoRequest(req), a, cfg)
		return acquisition{}, fmt.Errorf("%w: fencing counter %d is at its limit", ErrNotAcquired, highest)
	}
	f, err := r.fanOut(ctx, cfg.nodeTimeout, a.settled,
		func(ctx context.Context, _ int, n node) (bool, error) { return n.fence(ctx, &commit) }, nil, nil, false)
	var ft *tally
	if err == nil {
		ft = f.wait(ctx)
		if ft.won() && r.now().Before(a.until) {
			// Wait for the nodes about as fast as the quorum, as Unlock
			// does: the more nodes know the token when TryLock returns,
			// the more of them may later lose their data (see the package
			// documentation).
			f.linger(ft, r.now().Sub(f.start))
			a.fence = commit.fence
			return a, nil
		}
	}
	// Released on every node, the grants included: a token recorded on too
	// few nodes could be overtaken by a later holder's.
	_ = r.release(ctx, undoRequest(req), a, cfg)
	took := r.now().Sub(start)
	if err != nil {
		return acquisition{took: took}, err
	}
	reason := fmt.Sprintf("fencing token %d recorded on %d of %d nodes holding the lock, quorum %d", commit.fence, ft.yes, ft.n, ft.quorum)
	if ft.won() {
		reason = fmt.Sprintf("fencing token recorded after %v, no validity left of ttl %v", took, cfg.ttl)
	}
	return acquisition{took: took}, ft.err(ErrNotAcquired, reason)
}

// release runs the release script for an acquisition's token on every node
// and reports whether a quorum still held it. Nodes that have not answered
// when the outcome is certain finish in the background.
func (r *Redlock) release(ctx context.Context, req *request, a acquisition, cfg *config) error {
	f, err := r.fanOut(ctx, cfg.nodeTimeout, a.settled,
		func(ctx context.Context, _ int, n node) (bool, error) { return n.release(ctx, req) }, nil,
		func(ctx context.Context, n asyncNode, cb func(bool, error)) { n.startRelease(ctx, req, cb) }, false)
	if err != nil {
		return err
	}
	t := f.wait(ctx)
	if t.won() {
		// Nodes that answer about as fast as the quorum did are waited
		// for, up to as long again: the lock is then free everywhere when
		// Unlock returns, and the next holder does not find it still held
		// on a node a few microseconds behind. A slow node is not waited for.
		f.linger(t, r.now().Sub(f.start))
		return nil
	}
	return t.err(ErrNotHeld, fmt.Sprintf("token found on %d of %d nodes, quorum %d", t.yes, t.n, t.quorum))
}

// extend runs the extend script for an acquisition's token on every node and
// reports whether a quorum still held it and re-armed its TTL.
func (r *Redlock) extend(ctx context.Context, req *request, a acquisition, cfg *config) error {
	f, err := r.fanOut(ctx, cfg.nodeTimeout, a.settled,
		func(ctx context.Context, _ int, n node) (bool, error) { return n.extend(ctx, req) }, nil,
		func(ctx context.Context, n asyncNode, cb func(bool, error)) { n.startExtend(ctx, req, cb) }, false)
	if err != nil {
		return err
	}
	t := f.wait(ctx)
	if t.won() {
		return nil
	}
	err = t.err(ErrNotHeld, fmt.Sprintf("extended on %d of %d nodes, quorum %d", t.yes, t.n, t.quorum))
	if t.refused > t.n-t.quorum {
		// A quorum answered that the token is gone. Extend never re-creates
		// a key, so no later extension can succeed: the lock is lost.
		err = errors.Join(err, ErrLockLost)
	}
	return err
}

// nodeOp is one round trip to node n, the i-th; ok is its yes or no.
type nodeOp func(ctx context.Context, i int, n node) (ok bool, err error)

// vote is one node's answer to a nodeOp.
type vote struct {
	node int
	ok   bool
	err  error
}

// fanout is one operation in flight on every node. Its goroutines belong
// to the Redlock's WaitGroup: each ends when its node call (and undo, if
// any) returns, which the node timeout bounds for clients that honour
// context deadlines and the client's own timeouts bound otherwise.
type fanout struct {
	r         *Redlock
	timeout   time.Duration
	votes     chan vote       // one per node, buffered: senders never block
	decided   chan struct{}   // closed by decide
	undo      bool            // written before decided is closed
	undone    chan int        // nodes whose undo step finished, buffered
	granted   []bool          // per node: it said yes before the decision
	settled   []chan struct{} // acquisitions: per node, closed when its op has returned
	cancel    context.CancelFunc
	start     time.Time
	reentrant bool // an acquisition of a reentrant lock: see its undo
}

// fanOut starts op on every node, each in its own goroutine. Node i's op
// starts once after[i] is closed (after may be nil) and gets a context that
// keeps ctx's values but not its cancellation, bounded by timeout. If undo
// is not nil, each goroutine waits for the decision after its op and, when
// decide(true) is called and its node did not answer no, runs undo with a
// fresh timeout.
//
// When async is given (release and extend), a node that can run the call
// on its own worker (asyncNode) and need not wait for an earlier SET gets no
// goroutine of its own: the reply comes back through the callback.
func (r *Redlock) fanOut(ctx context.Context, timeout time.Duration, after []chan struct{}, op nodeOp, undo func(context.Context, node),
	async func(context.Context, asyncNode, func(bool, error)), reentrant bool) (*fanout, error) {
	n := len(r.nodes)
	f := &fanout{
		reentrant: reentrant,
		r:         r,
		start:     r.now(),
		timeout:   timeout,
		votes:     make(chan vote, n),
		decided:   make(chan struct{}),
		granted:   make([]bool, n),
	}
	if undo != nil { // an acquisition: later calls order themselves after it
		f.undone = make(chan int, n)
		f.settled = make([]chan struct{}, n)
	}
	if err := r.track(n); err != nil {
		return nil, err
	}
	detached := context.WithoutCancel(ctx)
	// One deadline for the whole fan-out; the last node call to return
	// cancels it.
	shared, cancelShared := context.WithTimeout(detached, timeout)
	f.cancel = cancelShared
	var running atomic.Int32
	running.Store(int32(n))
	for i, nd := range r.nodes {
		if f.settled != nil {
			f.settled[i] = make(chan struct{})
		}
		if an, ok := nd.(asyncNode); ok && async != nil && undo == nil && (after == nil || isClosed(after[i])) {
			async(shared, an, func(ok bool, err error) {
				err = nodeTimeoutErr(shared, err)
				if running.Add(-1) == 0 {
					f.cancel()
				}
				f.votes <- vote{node: i, ok: ok, err: err}
				r.wg.Done()
			})
			continue
		}
		go func() {
			defer r.wg.Done()
			opCtx, cancel := shared, context.CancelFunc(nil)
			if after != nil {
				select {
				case <-after[i]: // settled already, as it nearly always is
				default:
					// Wait for this node's SET, then give the call a whole
					// node timeout of its own.
					<-after[i]
					opCtx, cancel = context.WithTimeout(detached, timeout)
				}
			}
			ok, err := callNode(opCtx, i, nd, op)
			if cancel != nil {
				cancel()
			}
			if running.Add(-1) == 0 {
				f.cancel()
			}
			if f.settled != nil {
				close(f.settled[i])
			}
			f.votes <- vote{node: i, ok: ok, err: err}
			if undo == nil {
				return
			}
			<-f.decided
			// A reentrant attempt is undone only where it surely took a
			// hold: its undo drops one hold of the owner, which on a node
			// the attempt never reached would be a hold the owner already
			// had. An extra hold left on a node is harmless: the owner's
			// last Unlock drops them all.
			if f.undo && (ok || (err != nil && !unsent(err) && !f.reentrant)) {
				uctx, ucancel := context.WithTimeout(detached, timeout)
				undo(uctx, nd)
				ucancel()
			}
			f.undone <- i
		}()
	}
	return f, nil
}

// linger collects the replies still due, for at most d (and never past
// the node timeout), after the outcome was decided.
func (f *fanout) linger(t *tally, d time.Duration) {
	left := 0
	for _, a := range t.answers {
		if a == pending {
			left++
		}
	}
	if left == 0 {
		return
	}
	d = min(d, f.timeout-f.r.now().Sub(f.start))
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for left > 0 {
		select {
		case v := <-f.votes:
			if t.answers[v.node] == pending {
				left--
				f.granted[v.node] = v.ok && v.err == nil
				t.add(v.node, v.ok, f.nodeErr(v.node, v.err))
			}
		case <-timer.C:
			return
		}
	}
}

// bothSettled returns, per node, a channel closed once both a[i] and b[i]
// are (nil counts as closed). A goroutine waits only where one is not yet.
func (r *Redlock) bothSettled(a, b []chan struct{}) []chan struct{} {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := make([]chan struct{}, len(a))
	for i := range a {
		switch {
		case isClosed(a[i]):
			out[i] = b[i]
		case isClosed(b[i]):
			out[i] = a[i]
		default:
			c := make(chan struct{})
			out[i] = c
			if r.track(1) != nil {
				close(c)
				continue
			}
			go func() {
				defer r.wg.Done()
				<-a[i]
				<-b[i]
				close(c)
			}()
		}
	}
	return out
}

// callNode runs op on one node with ctx, which carries the node timeout.
func callNode(ctx context.Context, i int, n node, op nodeOp) (bool, error) {
	ok, err := op(ctx, i, n)
	return ok, nodeTimeoutErr(ctx, err)
}

// isClosed reports whether c is closed, without waiting.
func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// nodeTimeoutErr turns an error that came with the node timeout (ctx's
// deadline) into ErrNodeTimeout, and keeps any other context error a client
// returns (a dial timeout matches context.DeadlineExceeded) out of the
// chain, where it would pass for the caller's own context ending.
func nodeTimeoutErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		if unsent(err) {
			return fmt.Errorf("%v: %w", err, errUnsent) //nolint:errorlint // on purpose: see above
		}
		return fmt.Errorf("%v", err) //nolint:errorlint // on purpose: see above
	}
	if err != nil && ctx.Err() != nil {
		// The node timeout passed: say so, and keep this context's error
		// out of the chain, where it would pass for the caller's deadline.
		// Whether the command was sent at all stays known.
		if unsent(err) {
			err = fmt.Errorf("%w: %w", ErrNodeTimeout, errUnsent)
		} else {
			err = fmt.Errorf("%w (%v)", ErrNodeTimeout, err) //nolint:errorlint // on purpose: see above
		}
	}
	return err
}

// wait collects votes until the outcome is certain: a quorum said yes, a
// quorum can no longer say yes, the node timeout passed (every node still
// silent then counts as failed with ErrNodeTimeout), or ctx ended.
func (f *fanout) wait(ctx context.Context) *tally {
	t := newTally(len(f.granted))
	timer := time.NewTimer(f.timeout)
	defer timer.Stop()
	for !t.decided() {
		select {
		case v := <-f.votes:
			f.granted[v.node] = v.ok && v.err == nil
			t.add(v.node, v.ok, f.nodeErr(v.node, v.err))
		case <-timer.C:
			for i, a := range t.answers {
				if a == pending {
					t.add(i, false, f.nodeErr(i, ErrNodeTimeout))
				}
			}
		case <-ctx.Done():
			t.ctxErr = ctx.Err()
			if cause := context.Cause(ctx); !errors.Is(t.ctxErr, cause) {
				t.ctxErr = errors.Join(t.ctxErr, cause)
			}
			return t
		}
	}
	return t
}

func (f *fanout) nodeErr(i int, err error) error {
	if err == nil {
		return nil
	}
	return &NodeError{Index: i, Addr: f.r.nodes[i].addr(), Err: err}
}

// decide releases the goroutines waiting for the outcome; undo says whether
// they must undo their op.
func (f *fanout) decide(undo bool) {
	f.undo = undo
	close(f.decided)
}

// waitUndone waits, at most timeout, for the undo steps of the nodes that
// had said yes when the outcome was decided: responsive nodes that surely
// hold the token. Nodes that failed are undone in the background: they may
// be slow or down, and the caller should not wait for them.
func (f *fanout) waitUndone(timeout time.Duration) {
	left := 0
	for _, g := range f.granted {
		if g {
			left++
		}
	}
	if left == 0 {
		return
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for left > 0 {
		select {
		case i := <-f.undone:
			if f.granted[i] {
				left--
			}
		case <-timer.C:
			return
		}
	}
}

// answer is what one node said, as far as the tally knows.
type answer uint8

const (
	pending answer = iota // not answered yet
	granted               // did what was asked
	refused               // answered no: held by another value, token absent
	failed                // error or timeout
)

// tally counts the answers of one fan-out and knows when the outcome is
// certain.
type tally struct {
	n, quorum int
	yes, no   int // granted, and refused or failed
	refused   int // answered no, without error
	answers   []answer
	nodeErrs  []error
	ctxErr    error
}

func newTally(n int) *tally {
	return &tally{n: n, quorum: quorum(n), answers: make([]answer, n)}
}

func (t *tally) add(i int, ok bool, err error) {
	if t.answers[i] != pending {
		return
	}
	switch {
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

// won reports whether a quorum answered yes.
func (t *tally) won() bool { return t.yes >= t.quorum }

// lost reports whether a quorum can no longer answer yes.
func (t *tally) lost() bool { return t.n-t.no < t.quorum }

func (t *tally) decided() bool { return t.won() || t.lost() }

// err builds the error of a failed operation: sentinel, the reason, the
// context's error when it ended, and one *NodeError per failed node.
func (t *tally) err(sentinel error, reason string) error {
	errs := make([]error, 0, 2+len(t.nodeErrs))
	errs = append(errs, fmt.Errorf("%w: %s", sentinel, reason))
	if t.ctxErr != nil {
		errs = append(errs, t.ctxErr)
	}
	errs = append(errs, t.nodeErrs...)
	return errors.Join(errs...)
}
