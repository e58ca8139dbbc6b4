package engine

import (
	"context"
	"slices"
	"sync"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/redlock/internal/quorum"
)

// Extensions together. Renewal makes the extensions of the locks held
// fall due together (redlock/internal/lease); each was its own quorum
// round, with its own request, reply and timers on every node. Those
// that may (node.Together: plain, of one name, without WAIT) now join the
// extensions waiting for a round: while one round is under way the next
// gathers, and goes as one request per node (node.Extensions), each
// extension tallied on its own as its own round would tally it (its
// quorum, its late yeses, its error). The first extension of a burst goes
// with the few that came with it; the rest gather while it travels.

// maxTogether bounds the extensions of one round: as many as renewal runs
// at once (see Work).
const maxTogether = node.Workers * node.MaxBatch

// together is the extensions waiting for a round, and whether one runs.
type together struct {
	mu      sync.Mutex
	waiting []*joined
	running bool
}

// joined is one extension waiting for its round, and its outcome.
type joined struct {
	ctx     context.Context //nolint:containedctx // the caller's, for its node failures' reports
	op      *node.Extend
	c       Lapse
	tally   *quorum.Tally
	granted []int
	err     error
	wake    chan struct{} // closed when it is to lead the next round
	done    chan struct{} // closed once its outcome is known
}

// ExtendTogether is Extend for renewal: an extension that may travel with
// others (node.Together) waits for the next round of extensions and
// shares its requests; any other goes alone. It blocks until its outcome
// is known, and answers as Extend does.
func (e *Engine) ExtendTogether(ctx context.Context, op node.Op, c Lapse) ([]int, error) {
	ext, ok := op.(*node.Extend)
	if !ok || !node.Together(ext) {
		return e.Extend(ctx, op, c)
	}
	if err := e.Track(); err != nil {
		return nil, err
	}
	defer e.life.Done()
	j := &joined{ctx: ctx, op: ext, c: c, wake: make(chan struct{}), done: make(chan struct{})}
	t := &e.together
	t.mu.Lock()
	t.waiting = append(t.waiting, j)
	lead := !t.running
	t.running = true
	t.mu.Unlock()
	if !lead {
		select {
		case <-j.done:
			return j.granted, j.err
		case <-j.wake:
		}
	}
	e.leadTogether()
	<-j.done
	return j.granted, j.err
}

// leadTogether runs one round of the extensions waiting, its own among
// them (the first), and wakes the first of those still waiting to run the
// next: each leader goes back to its own lease once its round is over.
func (e *Engine) leadTogether() {
	t := &e.together
	t.mu.Lock()
	n := min(len(t.waiting), maxTogether)
	batch := slices.Clone(t.waiting[:n])
	t.waiting = slices.Delete(t.waiting, 0, n)
	t.mu.Unlock()
	if len(batch) == 1 {
		j := batch[0]
		j.granted, j.err = e.Extend(j.ctx, j.op, j.c)
		close(j.done)
	} else {
		e.extendTogether(batch)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.waiting) == 0 {
		t.running = false
		return
	}
	close(t.waiting[0].wake)
}

// extendTogether runs one round for the extensions of batch, and tells
// each its outcome.
func (e *Engine) extendTogether(batch []*joined) {
	op := &node.Extensions{Each: make([]*node.Extend, len(batch))}
	tallies := make([]*quorum.Tally, len(batch))
	timeout := batch[0].c.Settings.NodeTimeout
	for k, j := range batch {
		op.Each[k] = j.op
		j.tally = quorum.NewTally(e.Pool.Size(), j.c.Quorum)
		tallies[k] = j.tally
		timeout = max(timeout, j.c.Settings.NodeTimeout)
	}
	rd := quorum.NewRound(context.Background(), e.Pool, timeout, reportEach(batch), e.Pool.Size())
	late := &lateEach{batch: batch, reps: make([]*node.Reply, e.Pool.Size())}
	rd.Hook = late
	rd.SendAll(op, nil, nil)
	_ = rd.DecideEach(context.Background(), tallies)
	won := true
	for _, j := range batch {
		j.granted = j.tally.GrantedNodes()
		won = won && j.tally.Won()
	}
	late.decided()
	if !won {
		rd.LingerEach(timeout, tallies) // see settle
	}
	for _, j := range batch {
		if !j.tally.Won() {
			j.err = e.notExtended(j.tally, nil)
		}
		close(j.done)
	}
}

// reportEach reports a node's failure in a round of extensions together
// as each extension's own round would have: to each one's reporter, with
// its context.
func reportEach(batch []*joined) quorum.ReportFunc {
	return func(_ context.Context, i int, err error, late bool) {
		for _, j := range batch {
			if j.c.Report != nil {
				j.c.Report(j.ctx, i, err, late)
			}
		}
	}
}

// lateEach tells each extension of a round together of the nodes that
// granted it after the round was decided (see lateYes, Lapse.Late).
type lateEach struct {
	mu    sync.Mutex
	batch []*joined
	reps  []*node.Reply // each node's reply, once in
	done  bool
}

// Heard implements quorum.Hook, on node i's goroutine.
func (l *lateEach) Heard(i int, rep node.Reply) {
	if !rep.OK || rep.Err != nil {
		return
	}
	l.mu.Lock()
	l.reps[i] = &rep
	done := l.done
	l.mu.Unlock()
	if done {
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
			l.tell(i, *rep, func(j *joined) bool { return slices.Contains(j.granted, i) })
		}
	}
}

// tell tells each extension that node i granted in rep, unless voted says
// it counted the node already.
func (l *lateEach) tell(i int, rep node.Reply, voted func(*joined) bool) {
	for k, j := range l.batch {
		if j.c.Late != nil && quorum.Each(rep, k).OK && (voted == nil || !voted(j)) {
			j.c.Late(i)
		}
	}
}
