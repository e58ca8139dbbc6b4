package goredis

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/node"
)

// Dial failures. go-redis retries a dial that failed (DialerRetries, 5 by
// default, 100 ms apart) apart from the caller, and hands back only the
// last error, once every try failed: long after the node timeout, when the
// library has stopped waiting, so the node timed out with no cause. A dial
// hook, added once per client, keeps the client's last failed dial as it
// happens (a connection refused, a certificate not trusted), until a dial
// succeeds; a node timeout names it (see LastDialFailure).

// LastDialFailure implements DialWatcher.
func (g *Transport) LastDialFailure() *node.DialFailure {
	if g.dials == nil {
		return nil
	}
	return g.dials.failure()
}

// dials is what a client's dial hook learns, shared by every node.Redis over
// that client. Safe for concurrent use.
type dials struct {
	now func() time.Time // the clock of the first Redlock that made them
	mu  sync.Mutex
	// last is, per address dialled, the outcome of the dial started last
	// among those that ended: dials run side by side (an operation's, the
	// capability probe's, the pool's own retries), and one that began
	// before a success may fail after it; its failure is stale and must
	// not hide the success. A client dials one address (a Sentinel-managed
	// one, the master it is told of); a Cluster's or Ring's shards, one
	// each.
	last    map[string]dialOutcome
	started atomic.Uint64 // dials begun; numbers them
	// answered is set while the outcome recorded last is a connection
	// that answered (see guard).
	answered atomic.Bool
	ref      refusal // refused dials (see refusal.go)
	// master is the master a Sentinel-managed client's last connection
	// reached (see sentinel.go); nil for another client.
	master *masterName
}

// dialOutcome is a dial's number in start order and its failure, nil
// when it succeeded.
type dialOutcome struct {
	n       uint64
	failure *node.DialFailure
}

// watched holds the dials of each client watched, by a weak pointer to
// the client (a *redis.Client, *redis.ClusterClient or *redis.Ring).
// Entries go with their clients.
var watched sync.Map

// dialsOf returns where c's dials are kept, adding the dial hook the first
// time (a client given to several Redlocks gets one hook): to a client
// itself, and to each shard of a Cluster or Ring, those it has and those it
// makes later. A Cluster's shards made before (by commands sent before
// the Redlock was built) are not watched: go-redis lists them only after
// asking the cluster for its slots. nil for another kind of client. It
// sends no command, so it needs no permission.
func dialsOf(c redis.UniversalClient, now func() time.Time) *dials {
	switch c := c.(type) {
	case *redis.Client:
		return watch(c, now, func(d *dials) {
			if ClientAddr(c) == FailoverAddr {
				d.master = new(masterName)
			}
		}, func(h dialHook) { c.AddHook(h) })
	case *redis.ClusterClient:
		return watch(c, now, nil, func(h dialHook) {
			c.OnNewNode(func(shard *redis.Client) { shard.AddHook(h) })
		})
	case *redis.Ring:
		return watch(c, now, nil, func(h dialHook) {
			c.OnNewNode(func(shard *redis.Client) { shard.AddHook(h) })
			_ = c.ForEachShard(context.Background(), func(_ context.Context, shard *redis.Client) error {
				shard.AddHook(h)
				return nil
			})
		})
	}
	return nil
}

// watch returns c's dials, making them with init and hooking them to the
// client with attach the first time.
func watch[C any](c *C, now func() time.Time, init func(*dials), attach func(dialHook)) *dials {
	key := weak.Make(c)
	if v, ok := watched.Load(key); ok {
		return v.(*dials)
	}
	d := &dials{last: map[string]dialOutcome{}, now: now}
	if init != nil {
		init(d)
	}
	if v, loaded := watched.LoadOrStore(key, d); loaded {
		return v.(*dials)
	}
	runtime.AddCleanup(c, func(k weak.Pointer[C]) { watched.Delete(k) }, key)
	attach(dialHook{d: d})
	return d
}

// dialed records the failure of dial number n to addr, unless a dial to
// addr started after it has already ended; for a Sentinel-managed client,
// the master a dial reached.
func (d *dials) dialed(n uint64, addr string, conn net.Conn, err error) {
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
		f := &node.DialFailure{Err: err, At: d.now()}
		d.record(addr, dialOutcome{n: n, failure: f})
		if refusedDial(err) {
			d.refused(n, f)
		}
	default:
		d.connected(n)
		// A success is recorded once the connection answers (see
		// watchedConn): until then the last failure stands.
		if d.master != nil && conn.RemoteAddr() != nil {
			a := conn.RemoteAddr().String() + " (Sentinel-managed master)"
			d.master.at.Store(&a)
		}
	}
}

func (d *dials) record(addr string, o dialOutcome) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, ok := d.last[addr]; !ok || cur.n < o.n {
		d.last[addr] = o
		d.answered.Store(o.failure == nil)
	}
}

// failure is the latest failure among the addresses whose last dial
// failed; nil when there is none.
func (d *dials) failure() *node.DialFailure {
	d.mu.Lock()
	defer d.mu.Unlock()
	var f *node.DialFailure
	for _, o := range d.last {
		if o.failure != nil && (f == nil || o.failure.At.After(f.At)) {
			f = o.failure
		}
	}
	return f
}

// dialHook records each dial of a client: its error, or for a
// Sentinel-managed client the master it reached.
type dialHook struct{ d *dials }

func (h dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n := h.d.started.Add(1)
		conn, err := next(ctx, network, addr)
		h.d.dialed(n, addr, conn, err)
		if err != nil {
			return conn, err
		}
		return watchConn(conn, h.d, addr, n), nil
	}
}

// A dial succeeds when its connection answers: a connection that the node
// accepted and then reset or closed before its first reply (a proxy whose
// server is down does that) fails the call the way a failed dial does,
// and go-redis retries it as one, dial and all. So the outcome of a dial
// that connected is recorded by its connection: its first reply, or its
// failure before that. Later failures are the calls' own.

// watchedConn is a dialled connection that records its dial's outcome:
// its first read that returns data, or its failure before that.
type watchedConn struct {
	net.Conn
	d        *dials
	addr     string
	n        uint64      // its dial's number
	answered atomic.Bool // a read returned data
}

// watchedSysConn is a watchedConn over a connection that exposes its file
// descriptor (a TCP one): go-redis' health check of an idle connection
// needs it.
type watchedSysConn struct {
	*watchedConn
	sys syscall.Conn
}

func (c watchedSysConn) SyscallConn() (syscall.RawConn, error) { return c.sys.SyscallConn() }

// watchConn wraps conn, dial number n to addr.
func watchConn(conn net.Conn, d *dials, addr string, n uint64) net.Conn {
	w := &watchedConn{Conn: conn, d: d, addr: addr, n: n}
	if sys, ok := conn.(syscall.Conn); ok {
		return watchedSysConn{watchedConn: w, sys: sys}
	}
	return w
}

// NetConn returns the connection wrapped (go-redis looks through it).
func (c *watchedConn) NetConn() net.Conn { return c.Conn }

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.answered.Load() {
		if n > 0 {
			c.answered.Store(true)
			c.d.record(c.addr, dialOutcome{n: c.n})
		} else {
			c.failed(err)
		}
	}
	return n, err
}

func (c *watchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && !c.answered.Load() {
		c.failed(err)
	}
	return n, err
}

// failed records err, the failure of a connection that has read nothing,
// as its dial's outcome: unless it is a timeout (a node that does not
// answer is no node that refused: the node timeout says so already) or
// the connection's own close.
func (c *watchedConn) failed(err error) {
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() || errors.Is(err, net.ErrClosed) {
		return
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("the node closed the connection before its first reply")
	}
	c.d.record(c.addr, dialOutcome{n: c.n, failure: &node.DialFailure{Err: err, At: c.d.now()}})
}

func (dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
