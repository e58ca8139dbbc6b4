package node

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Refused dials. A dial that the server's host refuses (ECONNREFUSED: no
// one listens on the port) is certain, unlike a timeout: the node is down
// now. go-redis hands that refusal to the call only after its own dial
// retries (DialerRetries, 5 tries 100 ms apart) and command retries
// (MaxRetries, 3), logging a line for each failed round of dials, and
// every call to the node does the same: seconds of calls in flight and
// dozens of lines, while the library knows nothing. So the dial hook
// tells at once, on the dialling goroutine:
//
//   - the node's listener (the pool, see OnRefused), which puts the node
//     down and probes it quietly;
//   - the node's calls in flight that were sent before any connection of
//     the client answered (see guard): their contexts are cancelled with
//     the refusal as cause, which stops go-redis' retries of them, and each
//     fails with the refusal. A node whose connections answered is not
//     guarded, since the guard costs an allocation per round trip: the
//     calls in flight when such a server stops run go-redis' retries out
//     (the node is down from the first refusal all the same);
//   - the node's background calls are not sent to a host that refuses:
//     the first capability probe and script load wait for a quiet dial
//     (see knock), and identification is not sent while the client's last
//     dial was refused and none connected since (see refusing); the pool's
//     probe dials quietly first (QuietDial), which lifts that.
//
// Only a client of one server (not a Cluster, a Ring, or a
// Sentinel-managed client, whose servers come and go on their own) is
// watched so.

// refusal is what a client's dials say of refusals, per client (shared by
// every Redis over it). Guarded by the dials' mu.
type refusal struct {
	// last is the latest refused dial, by its number (refusedN), until a
	// dial started after it connected (connectedN); nil then.
	last       *DialFailure
	refusedN   uint64
	connectedN uint64
	// nodes are the Redis nodes over the client that have run (from
	// their first call), each told of a refusal until it is closed.
	nodes map[*Redis]struct{}
}

// refusedDial reports whether err is a dial refused by the server's host.
func refusedDial(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// refused records dial number n, refused with f, and tells the nodes over
// the client, unless a dial started after it has connected.
func (d *dials) refused(n uint64, f *DialFailure) {
	d.mu.Lock()
	if n < d.ref.connectedN || n < d.ref.refusedN {
		d.mu.Unlock()
		return
	}
	d.ref.last, d.ref.refusedN = f, n
	nodes := make([]*Redis, 0, len(d.ref.nodes))
	for r := range d.ref.nodes {
		if r.closed() {
			delete(d.ref.nodes, r)
			continue
		}
		nodes = append(nodes, r)
	}
	d.mu.Unlock()
	for _, r := range nodes {
		r.dialRefused(f.Err)
	}
}

// connected records that dial number n connected: the host listens.
func (d *dials) connected(n uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ref.connectedN = max(d.ref.connectedN, n)
	if d.ref.refusedN < n {
		d.ref.last = nil
	}
}

// refusing returns the latest refused dial while no dial started after it
// has connected; nil otherwise.
func (d *dials) refusing() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ref.last == nil {
		return nil
	}
	return d.ref.last.Err
}

// listen adds r to the nodes told of refusals, and drops those closed
// since (Close does not reach the dials: they go at the next listen or
// refusal).
func (d *dials) listen(r *Redis) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ref.nodes == nil {
		d.ref.nodes = map[*Redis]struct{}{}
	}
	for o := range d.ref.nodes {
		if o.closed() {
			delete(d.ref.nodes, o)
		}
	}
	d.ref.nodes[r] = struct{}{}
}

// refused is what a node does of its client's refused dials: whom it
// tells, and the calls in flight they end (see guard).
type refused struct {
	on    func(err error)
	mu    sync.Mutex
	next  uint64
	calls map[uint64]context.CancelCauseFunc
}

// OnRefused sets f, told of each refused dial of the node's client, on
// the dialling goroutine, while the node runs (from its first call to
// Close): f must not block. Set it before the first call. Only a client of
// one server is watched (see above).
func (n *Redis) OnRefused(f func(err error)) { n.refused.on = f }

// single reports whether the node's client is watched for refusals: a
// client of one server.
func (n *Redis) single() bool {
	_, ok := n.client.(*redis.Client)
	return ok && n.dials != nil && n.master == nil && n.address != FailoverAddr
}

// closed reports whether Close has stopped the node.
func (n *Redis) closed() bool {
	select {
	case <-n.life.Closing():
		return true
	default:
		return false
	}
}

// refusing returns the client's latest refused dial while no dial has
// connected since (see above); nil for a client not watched.
func (n *Redis) refusing() error {
	if !n.single() {
		return nil
	}
	return n.dials.refusing()
}

// dialRefused is told of a refused dial of the node's client: it ends the
// guarded calls in flight with it, and tells the listener; nothing once
// the node is closed.
func (n *Redis) dialRefused(err error) {
	if n.closed() {
		return
	}
	g := &n.refused
	g.mu.Lock()
	for _, cancel := range g.calls {
		cancel(err)
	}
	clear(g.calls)
	g.mu.Unlock()
	if g.on != nil {
		g.on(err)
	}
}

// background runs the node's first background calls, on a goroutine of
// its own: it listens for refusals, knocks, and unless the host refused,
// asks the node's Caps and loads the scripts (see run).
func (n *Redis) background(name string) {
	if n.single() {
		n.dials.listen(n)
		n.knock()
		if n.refusing() != nil {
			return // found down: Caps unknown, as when the probe fails; the scripts load at the first NOSCRIPT
		}
	}
	n.life.Go(func() { n.probeCaps(name) })
	n.loadScripts()
}

// knock dials the node quietly (see QuietDial) before its first
// background calls when no connection of its client has answered yet: a
// host that refuses is then found so without them (see background),
// where each would have been a go-redis call that logs its failed dials.
// Bounded by a second, and cut short by Close.
func (n *Redis) knock() {
	if n.dials.answered.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	done := make(chan struct{})
	n.life.Go(func() { // Close must not wait out a silent node's dial
		select {
		case <-n.life.Closing():
			cancel()
		case <-done:
		}
	})
	_ = n.QuietDial(ctx)
	close(done)
	cancel()
}

// guard returns ctx, cancelled with the refusal as its cause when the
// client's dial is refused while the call runs, and the function that
// ends the guard once the call returned. The context is ctx itself for a
// client not watched, and for one whose last dial answered (see above).
func (n *Redis) guard(ctx context.Context) (context.Context, func()) {
	if !n.single() || n.dials.answered.Load() {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	g := &n.refused
	g.mu.Lock()
	if g.calls == nil {
		g.calls = map[uint64]context.CancelCauseFunc{}
	}
	g.next++
	id := g.next
	g.calls[id] = cancel
	g.mu.Unlock()
	return ctx, func() {
		g.mu.Lock()
		delete(g.calls, id)
		g.mu.Unlock()
		cancel(nil)
	}
}

// refusedCause returns the refusal that ended ctx, a guarded context (see
// guard); nil when none did.
func refusedCause(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && refusedDial(cause) {
		return cause
	}
	return nil
}

// runGuarded runs r, a Runner, as a guarded call (see guard); at once with
// the refusal while the client's dials are refused.
func (n *Redis) runGuarded(ctx context.Context, r Runner) Reply {
	if err := n.refusing(); err != nil {
		return Reply{Err: err}
	}
	ctx, unguard := n.guard(ctx)
	rep := r.Run(ctx, n.via)
	unguard()
	if cause := refusedCause(ctx); cause != nil && errors.Is(rep.Err, context.Canceled) {
		rep.Err = cause
	}
	return rep
}

// refusedAll gives every command of batch that a refusal cancelled (ctx,
// guarded, see guard) the refusal as its error: go-redis answers it
// context.Canceled, which would read as the caller's. It returns at, the
// node's time the batch's round trip read.
func refusedAll(ctx context.Context, batch []*call, at time.Time) time.Time {
	cause := refusedCause(ctx)
	if cause == nil {
		return at
	}
	for _, c := range batch {
		for i := range c.cmds {
			if errors.Is(c.cmds[i].err, context.Canceled) {
				c.cmds[i].err = cause
			}
		}
	}
	return at
}
