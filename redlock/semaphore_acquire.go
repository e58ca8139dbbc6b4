package redlock

import (
	"context"
	"fmt"
	"sync"

	"github.com/redlock-go/redlock/internal/node"
)

// A semaphore's acquisition: one attempt to be admitted by a quorum of
// nodes, and the release of what a failed attempt may have taken. It is a
// lock's acquisition (acquire.go) with two differences: the quorum is the
// semaphore's, and there is no split-vote rule, since a node that refuses
// names no single competitor to give way to (contenders that split the
// free permits all fail, release, and retry after their randomised
// back-off).

// permitTry is one call of acquirePermit.
type permitTry struct {
	op     node.Op
	undo   node.Op // gives back what op took, silently
	cfg    *config
	report reportFunc
	quorum int
}

// acquirePermit makes one attempt to be admitted by a quorum.
//
//  1. Note the start on the monotonic clock.
//  2. Send the acquire request to every node at once, each through its
//     gate, which holds back the attempt's releases until it returned.
//  3. Decide as soon as the outcome is certain: c.quorum nodes admitted
//     the token, or no quorum can.
//  4. Succeed only with a quorum AND validity left: start + ttl - drift,
//     as for a lock (each node's permit expires ttl after the node
//     admitted it, so no earlier than start + ttl by its clock).
//  5. Otherwise release on every node that may have admitted the token
//     (mustUndo), each once its acquire request returned; the caller
//     waits, at most a node timeout, for the nodes that had admitted it.
//     Releases that cannot be delivered are owed to their node.
func (r *Redlock) acquirePermit(ctx context.Context, c permitTry) (acquisition, error) {
	idr, err := r.enter()
	if err != nil {
		return acquisition{}, err
	}
	defer r.wg.Done()
	n := r.pool.size()
	gates := newGates(n)
	rd := newRound(ctx, r.pool, c.cfg.nodeTimeout, c.report, n).needs(c.quorum)
	may := &admitted{held: make([]bool, n)}
	rd.hook = may
	for i := range n {
		rd.post(i, c.op, gates[i], nil, false, true)
	}
	ctxErr := rd.decide(ctx)
	t := rd.t
	start := rd.start
	held, until, idErr := r.held(idr, rd, ctxErr, c.cfg)
	if held {
		return acquisition{start: start, until: until}, nil
	}
	r.undoWith(ctx, c.undo, c.cfg, c.report, gates, may.has, ctxErr == nil, t.grantedNodes())
	failed := acquisition{granted: t.yes, took: r.now().Sub(start), hopeless: t.hopeless()}
	if idErr != nil {
		return failed, idErr
	}
	reason := fmt.Sprintf("%d of %d nodes admitted, quorum %d", t.yes, t.n, t.quorum)
	switch {
	case failed.hopeless:
		reason += fmt.Sprintf("; misconfigured nodes: %d, too many for a quorum to admit until they are fixed", t.misconfigured())
	case ctxErr == nil && t.won():
		reason = fmt.Sprintf("quorum admitted after %v, no validity left of ttl %v", failed.took, c.cfg.ttl)
	}
	return failed, r.fail(ErrNotAcquired, reason, ctxErr, t)
}

// admitted records, on the nodes' goroutines, which nodes may hold an
// attempt's token (see mustUndo): those must be released if it fails.
type admitted struct {
	mu   sync.Mutex
	held []bool
}

// heard implements hook.
func (a *admitted) heard(i int, rep node.Reply) {
	if mustUndo(rep, false) {
		a.mu.Lock()
		a.held[i] = true
		a.mu.Unlock()
	}
}

// has reports whether node i may hold the token; it is called once node
// i's acquire request returned.
func (a *admitted) has(i int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held[i]
}
