package engine

import (
	"context"
	"errors"
	"fmt"
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
	if !lead && !j.await(ctx) {
		if t.leave(j) {
			return nil, errors.Join(fmt.Errorf("%w: not sent, its context ended first", errNotExtended), context.Cause(ctx))
		}
		j.await(context.Background()) // taken into a round, or to lead the next
	}
	if !j.finished() {
		e.leadTogether()
	}
	<-j.done
	return j.granted, j.err
}

// await waits until j's outcome is known or j is to lead the next round;
// false when ctx ended first.
func (j *joined) await(ctx context.Context) bool {
	select {
	case <-j.done:
	case <-j.wake:
	case <-ctx.Done():
		return false
	}
	return true
}

// finished reports whether j's outcome is known.
func (j *joined) finished() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// leave takes j out of the extensions waiting, unless a round took it or
// it is to lead the next; it reports whether it did.
func (t *together) leave(j *joined) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-j.wake:
		return false
	default:
	}
	k := slices.Index(t.waiting, j)
	if k < 0 {
		return false
	}
	t.waiting = slices.Delete(t.waiting, k, k+1)
	return true
}

// leadTogether runs one round of the extensions waiting, its own among
// them (the first), and wakes the first of those still waiting to run the
// next once it is decided: each leader goes back to its own lease once
// its round is over.
func (e *Engine) leadTogether() {
	t := &e.together
	t.mu.Lock()
	// Those of the leader's node timeout: one round waits for the
	// slowest node as long as its timeout says.
	timeout := t.waiting[0].c.Settings.NodeTimeout
	var batch []*joined
	rest := t.waiting[:0]
	for _, j := range t.waiting {
		if len(batch) < maxTogether && j.c.Settings.NodeTimeout == timeout {
			batch = append(batch, j)
		} else {
			rest = append(rest, j)
		}
	}
	clear(t.waiting[len(rest):])
	t.waiting = rest
	t.mu.Unlock()
	e.extendTogether(batch, t.handOff)
}

// handOff wakes the first extension waiting to lead the next round, if
// any.
func (t *together) handOff() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.waiting) == 0 {
		t.running = false
		return
	}
	close(t.waiting[0].wake)
}

// extendTogether runs one round for the extensions of batch, and tells
// each its outcome; once the round is decided it calls next, before the
// failed extensions' linger (see settle), which holds back neither the
// extensions granted nor the next round.
func (e *Engine) extendTogether(batch []*joined, next func()) {
	op := &node.Extensions{Each: make([]*node.Extend, len(batch))}
	tallies := make([]*quorum.Tally, len(batch))
	timeout := batch[0].c.Settings.NodeTimeout // each one's (see leadTogether)
	for k, j := range batch {
		op.Each[k] = j.op
		j.tally = quorum.NewTally(e.Pool.Size(), j.c.Quorum)
		tallies[k] = j.tally
	}
	rd := quorum.NewRound(context.Background(), e.Pool, timeout, reportEach(batch), e.Pool.Size())
	late := &lateEach{batch: batch, reps: make([]*node.Reply, e.Pool.Size())}
	rd.Hook = late
	rd.SendAll(op, nil, nil)
	_ = rd.DecideEach(context.Background(), tallies)
	for _, j := range batch {
		j.granted = j.tally.GrantedNodes()
	}
	late.decided()
	var lost []*joined
	for _, j := range batch {
		if j.tally.Won() {
			close(j.done) // the others' errors need not hold it back
		} else {
			lost = append(lost, j)
		}
	}
	next()
	if len(lost) == 0 {
		return
	}
	tallies = tallies[:0]
	for _, j := range lost {
		tallies = append(tallies, j.tally)
	}
	// On a goroutine of its own: the leader, granted, goes back to its
	// lease (the waiting extensions hold the engine open meanwhile).
	e.life.Go(func() {
		rd.LingerEach(timeout, tallies) // see settle
		for _, j := range lost {
			j.err = e.notExtended(j.tally, nil)
			close(j.done)
		}
	})
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
