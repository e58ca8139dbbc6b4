package redlock

import (
	"context"
	"log/slog"
	"time"

	"github.com/redlock-go/redlock/redlock/report"
)

// Logging. The library logs nothing unless given a logger: then it says,
// one line each, what a program would otherwise hear only by polling
// Health and Audit or by implementing an report.AuditObserver. The logger is an
// Observer among others (logged), and hears the pool's changes of node
// state (see quorum.PoolConfig.Watch); nothing per operation.

// WithLogger makes the Redlock log, to l, one line per event a program
// should hear of without asking, and nothing per operation: a node going
// down (Warn, "redlock: node down") and coming back (Info, "redlock: node
// back"), once each way; each audit finding above [report.SeverityInfo],
// the first time it is found for a node (Warn, or Error when unsafe:
// "redlock: audit finding"); and each acquisition of a lock, permit or read
// lock lost before its release (Error, "redlock: lock lost"). Their
// attributes are listed in docs/API.md. The lines are written on the
// goroutine that found the event, so a handler that blocks holds it up. It
// does not replace [WithObserver]: a Mutex given WithObserver(nil) still
// logs. nil logs nothing. Default: nil, no logging.
func WithLogger(l *slog.Logger) Option {
	return redlockOption(func(c *config) error {
		c.logger = l
		return nil
	})
}

// events is the Observer every holder and the audit tell: the one given
// with WithObserver, and the logger's when there is one.
func (c *config) events() report.Observer {
	if c.logger == nil {
		return c.observer
	}
	return &logged{l: c.logger, next: c.observer}
}

// logged logs what WithLogger says, and passes everything on to next (nil:
// none).
type logged struct {
	l    *slog.Logger
	next report.Observer
}

func (o *logged) OpStart(ctx context.Context, op report.Op) context.Context {
	if o.next == nil {
		return ctx
	}
	return o.next.OpStart(ctx, op)
}

func (o *logged) OpEnd(ctx context.Context, op report.Op, res report.OpResult) {
	if o.next != nil {
		o.next.OpEnd(ctx, op, res)
	}
}

func (o *logged) LeaseEnd(h report.Lease) {
	if h.Lost {
		o.l.LogAttrs(context.Background(), slog.LevelError, "redlock: lock lost",
			slog.String("name", h.Name), slog.Any("err", h.Err), slog.Duration("held", clock().Sub(h.Acquired)))
	}
	if o.next != nil {
		o.next.LeaseEnd(h)
	}
}

func (o *logged) NodeFailed(ctx context.Context, e *report.NodeError) {
	if o.next != nil {
		o.next.NodeFailed(ctx, e)
	}
}

// Found implements report.AuditObserver.
func (o *logged) Found(index int, addr string, f report.Finding) {
	level := slog.LevelWarn
	if f.Severity >= report.SeverityUnsafe {
		level = slog.LevelError
	}
	o.l.LogAttrs(context.Background(), level, "redlock: audit finding", slog.Int("node", index), slog.String("addr", addr),
		slog.String("severity", f.Severity.String()), slog.String("code", f.Code), slog.String("msg", f.Message))
	if a, ok := o.next.(report.AuditObserver); ok {
		a.Found(index, addr, f)
	}
}

// nodeChanged logs node i, at addr, going down for cause at since, or
// coming back (see quorum.PoolConfig.Watch).
func (o *logged) nodeChanged(i int, addr string, down bool, since time.Time, cause error) {
	if down {
		o.l.LogAttrs(context.Background(), slog.LevelWarn, "redlock: node down", slog.Int("node", i), slog.String("addr", addr), slog.Any("err", cause))
		return
	}
	o.l.LogAttrs(context.Background(), slog.LevelInfo, "redlock: node back", slog.Int("node", i), slog.String("addr", addr),
		slog.Duration("down", clock().Sub(since).Round(time.Millisecond)))
}
