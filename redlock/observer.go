package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/lease"
	"github.com/redlock-go/redlock/redlock/report"
)

// WithObserver reports the operations, acquisitions and node failures of
// the Redlock or Mutex to o (see [report.Observer]); nil reports nothing, which
// lets one Mutex opt out of the Observer given to [New]. Node calls made in
// the background, not on behalf of one operation, report to the Observer
// given to New. Default: none.
func WithObserver(o report.Observer) LockOption {
	return optionFunc(func(c *config) error {
		c.observer = o
		return nil
	})
}

// observed is a report.Observer as a holder's events, naming the holder's calls
// by its kind: the wait, the single attempt, the release and the
// extension.
type observed struct {
	o     report.Observer
	kinds [4]report.OpKind
}

// observe returns o as the events of a holder of the kind named by kinds;
// nil when o is.
func observe(o report.Observer, kinds [4]report.OpKind) lease.Events {
	if o == nil {
		return nil
	}
	return &observed{o: o, kinds: kinds}
}

func (ob *observed) op(c lease.Call) report.Op {
	return report.Op{Kind: ob.kinds[c.Step], Name: c.Name, Renewal: c.Renewal}
}

func (ob *observed) OpStart(ctx context.Context, c lease.Call) context.Context {
	return ob.o.OpStart(ctx, ob.op(c))
}

func (ob *observed) OpEnd(ctx context.Context, c lease.Call, err error, canceled bool, attempts int) {
	ob.o.OpEnd(ctx, ob.op(c), report.OpResult{Err: err, Canceled: canceled, Attempts: attempts})
}

func (ob *observed) LeaseEnd(name string, acquired time.Time, lost bool, cause error) {
	ob.o.LeaseEnd(report.Lease{Name: name, Acquired: acquired, Lost: lost, Err: cause})
}
