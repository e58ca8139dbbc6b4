package quorum

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/life"
	"github.com/redlock-go/redlock/internal/node"
)

// Node failures, as the pool tells the layer above of them.

// ReportFunc tells the layer above of a node call that failed (nil: no
// one listens); late marks the error a call ended with after it was
// reported as timed out (see watch).
type ReportFunc func(ctx context.Context, i int, err error, late bool)

// watch reports one reported request's failure once: at the node timeout
// when no reply came by then, when the library stops waiting for it (a
// silent node's client may hold the call for seconds more), or with the
// reply's error. An error that comes after the timeout was reported is
// reported too, marked late, so that it is counted once.
type watch struct {
	wg       *life.Group // the pool's, which Close waits on
	timeouts timeouts
	ctx      context.Context //nolint:containedctx // the operation's values, for the report
	i        int
	sent     time.Time
	report   ReportFunc
	timer    *time.Timer
	reported atomic.Bool
}

// timeouts gives the error of a request to node i sent at sent that the
// node did not answer within the node timeout (see pool.timeoutErr).
type timeouts interface {
	TimeoutErr(i int, sent time.Time) error
}

// watchAfter starts watching a request to node i sent at sent, reported
// through report, for timeout; wg counts the timer until it ran or stopped.
func watchAfter(ctx context.Context, wg *life.Group, t timeouts, i int, sent time.Time, timeout time.Duration, report ReportFunc) *watch {
	w := &watch{wg: wg, timeouts: t, ctx: ctx, i: i, sent: sent, report: report}
	wg.Add(1)
	w.timer = time.AfterFunc(timeout, w.expire)
	return w
}

// expire runs at the node timeout.
func (w *watch) expire() {
	defer w.wg.Done()
	if w.reported.CompareAndSwap(false, true) {
		w.report(w.ctx, w.i, w.timeouts.TimeoutErr(w.i, w.sent), false)
	}
}

// replied runs when the reply came in, tooLate when after the node
// timeout.
func (w *watch) replied(rep node.Reply, tooLate bool) {
	if w.timer.Stop() {
		w.wg.Done()
	}
	switch {
	case rep.Err != nil:
		w.report(w.ctx, w.i, rep.Err, !w.reported.CompareAndSwap(false, true))
	case tooLate && w.reported.CompareAndSwap(false, true):
		w.report(w.ctx, w.i, node.ErrNodeTimeout, false) // answered, but after the operation stopped waiting
	}
}
