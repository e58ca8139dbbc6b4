package node

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
)

// Dial failures. go-redis retries a dial that failed (DialerRetries, 5 by
// default, 100 ms apart) apart from the caller, and hands back only the
// last error, once every try failed: long after the node timeout, when the
// library has stopped waiting, so the node timed out with no cause. A dial
// hook, added once per client, keeps the client's last failed dial as it
// happens (a connection refused, a certificate not trusted), until a dial
// succeeds; a node timeout names it (see LastDialFailure).

// DialFailure is a client's last dial that failed.
type DialFailure struct {
	Err error
	At  time.Time
}

// DialWatcher is a Node whose client's dials are watched.
type DialWatcher interface {
	// LastDialFailure returns the client's last dial when it failed; nil
	// when it succeeded, or no dial failed yet.
	LastDialFailure() *DialFailure
}

// LastDialFailure implements DialWatcher. A cluster's or ring's dials are
// not watched: nil.
func (n *Redis) LastDialFailure() *DialFailure {
	if n.dials == nil {
		return nil
	}
	return n.dials.last.Load().failure
}

// dials is what a client's dial hook learns, shared by every Redis over
// that client. Safe for concurrent use.
type dials struct {
	// last is the outcome of the dial started last among those that ended:
	// dials run side by side (an operation's, the capability probe's, the
	// pool's own retries), and one that began before a success may fail
	// after it; its failure is stale and must not hide the success.
	last    atomic.Pointer[dialOutcome]
	started atomic.Uint64 // dials begun; numbers them
	// master is the master a Sentinel-managed client's last connection
	// reached (see sentinel.go); nil for another client.
	master *masterName
}

// dialOutcome is a dial's number in start order and its failure, nil
// when it succeeded.
type dialOutcome struct {
	n       uint64
	failure *DialFailure
}

var noDial = &dialOutcome{}

// watched holds the dials of each client watched. Entries go with their
// clients.
var watched sync.Map // weak.Pointer[redis.Client] → *dials

// dialsOf returns where c's dials are kept, adding the dial hook the first
// time (a client given to several Redlocks gets one hook). It sends no
// command, so it needs no permission.
func dialsOf(c *redis.Client) *dials {
	key := weak.Make(c)
	if v, ok := watched.Load(key); ok {
		return v.(*dials)
	}
	d := new(dials)
	d.last.Store(noDial)
	if ClientAddr(c) == FailoverAddr {
		d.master = new(masterName)
	}
	if v, loaded := watched.LoadOrStore(key, d); loaded {
		return v.(*dials)
	}
	runtime.AddCleanup(c, func(k weak.Pointer[redis.Client]) { watched.Delete(k) }, key)
	c.AddHook(dialHook{d: d})
	return d
}

// dialed records the outcome of dial number n, unless a dial started after
// it has already ended.
func (d *dials) dialed(n uint64, conn net.Conn, err error) {
	switch {
	case errors.Is(err, context.Canceled):
		// The pool or its caller gave up on the dial: nothing learned of
		// the node.
	case err != nil:
		if errors.Is(err, context.DeadlineExceeded) {
			// Its words only: the dial's own deadline must not pass for
			// the caller's context ending (see ClientErr).
			err = errors.New(err.Error())
		}
		d.record(&dialOutcome{n: n, failure: &DialFailure{Err: err, At: time.Now()}})
	default:
		d.record(&dialOutcome{n: n})
		if d.master != nil && conn.RemoteAddr() != nil {
			a := conn.RemoteAddr().String() + " (Sentinel-managed master)"
			d.master.at.Store(&a)
		}
	}
}

func (d *dials) record(o *dialOutcome) {
	for {
		cur := d.last.Load()
		if cur.n > o.n || d.last.CompareAndSwap(cur, o) {
			return
		}
	}
}

// dialHook records each dial of a client: its error, or for a
// Sentinel-managed client the master it reached.
type dialHook struct{ d *dials }

func (h dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n := h.d.started.Add(1)
		conn, err := next(ctx, network, addr)
		h.d.dialed(n, conn, err)
		return conn, err
	}
}

func (dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
