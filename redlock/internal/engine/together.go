package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/redlock/internal/quorum"
)

// Extensions together. Renewal makes the extensions of the locks held
// fall due together, on the lines of a grid (redlock/internal/lease, and
// Due); each was its own quorum round, with its own request, reply and
// timers on every node, and a goroutine waiting for it. The extensions of
// one line that may travel together (node.Together: plain, of one name,
// without WAIT) now go as one request per node (node.Extensions), made
// and answered on the line's own goroutine, each tallied on its own as
// its own round would tally it (its quorum, its late yeses, its error).

// maxTogether bounds the extensions of one round (one request per node).
const maxTogether = node.Workers * node.MaxBatch

// Extension is one extension of a batch (see ExtendAll).
type Extension struct {
	// Ctx is the extension's context: its node failures are reported
	// with it, and one that ended before its round leaves it unsent.
	Ctx context.Context //nolint:containedctx // the holder's, carried to the line's goroutine
	Op  *node.Extend
	C   Lapse
	// By is when the lease would count as lost: the earliest go first.
	By time.Time
	// Done is told the extension's outcome, once, as Extend answers it:
	// the nodes that granted it, and its error. It is called on the
	// goroutine of the batch, or, for an extension that no quorum
	// granted, after its linger; it must not block.
	Done func(granted []int, err error)
}

// Batch is the extensions given to the functions of one line (see Due):
// they go together once the line's functions have run.
type Batch struct{ xs []Extension }

// Add adds x to the batch.
func (b *Batch) Add(x Extension) { b.xs = append(b.xs, x) }

// ExtendAll makes the extensions xs, as few rounds as the nodes allow,
// one after the other: a round takes the extensions of one node timeout
// (it waits for the slowest node as long as that says), at most
// maxTogether of them, the soonest lost first. It returns once every
// extension granted is told; those that no quorum granted are told after
// their linger, on a goroutine of the engine's.
func (e *Engine) ExtendAll(xs []Extension) {
	if len(xs) == 0 {
		return
	}
	if err := e.Track(); err != nil {
		for _, x := range xs {
			x.Done(nil, err)
		}
		return
	}
	defer e.life.Done()
	slices.SortStableFunc(xs, func(a, b Extension) int { return a.By.Compare(b.By) })
	for len(xs) > 0 {
		timeout := xs[0].C.Settings.NodeTimeout
		var round []Extension
		rest := xs[:0]
		for _, x := range xs {
			switch {
			case x.Ctx.Err() != nil:
				x.Done(nil, fmt.Errorf("%w: not sent, its context ended first: %w", errNotExtended, context.Cause(x.Ctx)))
			case len(round) < maxTogether && x.C.Settings.NodeTimeout == timeout:
				round = append(round, x)
			default:
				rest = append(rest, x)
			}
		}
		xs = rest
		if len(round) > 0 {
			e.extendTogether(round, timeout)
		}
	}
}

// extendTogether runs one round for the extensions of batch, all of node
// timeout timeout, and tells each its outcome: those a quorum granted
// once the round is decided, the others after their linger (see settle),
// which holds back neither the extensions granted nor the next round.
func (e *Engine) extendTogether(batch []Extension, timeout time.Duration) {
	op := &node.Extensions{Each: make([]*node.Extend, len(batch))}
	tallies := make([]*quorum.Tally, len(batch))
	for k, x := range batch {
		op.Each[k] = x.Op
		tallies[k] = quorum.NewTally(e.Pool.Size(), x.C.Quorum)
	}
	rd := quorum.NewRound(context.Background(), e.Pool, timeout, reportEach(batch), e.Pool.Size())
	late := &lateEach{batch: batch, granted: make([][]int, len(batch)), reps: make([]*node.Reply, e.Pool.Size())}
	rd.Hook = late
	rd.SendAll(op, nil, nil)
	_ = rd.DecideEach(context.Background(), tallies)
	for k, t := range tallies {
		late.granted[k] = t.GrantedNodes()
	}
	late.decided()
	var lost []int
	for k, x := range batch {
		if tallies[k].Won() {
			x.Done(late.granted[k], nil)
		} else {
			lost = append(lost, k)
		}
	}
	if len(lost) == 0 {
		return
	}
	e.life.Go(func() {
		losers := make([]*quorum.Tally, len(lost))
		for n, k := range lost {
			losers[n] = tallies[k]
		}
		rd.LingerEach(timeout, losers) // see settle
		for _, k := range lost {
			batch[k].Done(late.granted[k], e.notExtended(tallies[k], nil))
		}
	})
}

// reportEach reports a node's failure in a round of extensions together
// as each extension's own round would have: to each one's reporter, with
// its context.
func reportEach(batch []Extension) quorum.ReportFunc {
	return func(_ context.Context, i int, err error, late bool) {
		for _, x := range batch {
			if x.C.Report != nil {
				x.C.Report(x.Ctx, i, err, late)
			}
		}
	}
}

// lateEach tells each extension of a round together of the nodes that
// granted it after the round was decided (see lateYes, Lapse.Late).
type lateEach struct {
	mu      sync.Mutex
	batch   []Extension
	granted [][]int       // each extension's voters, once the round is decided
	reps    []*node.Reply // each node's reply, once in
	done    bool
}

// Heard implements quorum.Hook, on node i's goroutine. It also reports
// each extension's own failure where the node answered the request (a
// sharded node's call for one key that failed, see node.DoEach): the
// round's reporter hears only of a request that failed whole.
func (l *lateEach) Heard(i int, rep node.Reply) {
	if rep.Err != nil {
		return
	}
	l.mu.Lock()
	if rep.OK {
		l.reps[i] = &rep
	}
	done := l.done
	l.mu.Unlock()
	for k, x := range l.batch {
		if r := quorum.Each(rep, k); r.Err != nil && x.C.Report != nil {
			x.C.Report(x.Ctx, i, r.Err, done)
		}
	}
	if done && rep.OK {
		l.tell(i, rep, nil)
	}
}

// decided tells each extension of the nodes that granted it and are not
// among its voters, and every later one as it comes.
func (l *lateEach) decided() {
	l.mu.Lock()
	l.done = true
	reps := slices.Clone(l.reps)
	l.mu.Unlock()
	for i, rep := range reps {
		if rep != nil {
			l.tell(i, *rep, func(k int) bool { return slices.Contains(l.granted[k], i) })
		}
	}
}

// tell tells each extension that node i granted in rep, unless voted says
// it counted the node already.
func (l *lateEach) tell(i int, rep node.Reply, voted func(k int) bool) {
	for k, x := range l.batch {
		if x.C.Late != nil && quorum.Each(rep, k).OK && (voted == nil || !voted(k)) {
			x.C.Late(i)
		}
	}
}
