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
//     guarded: the guard costs an allocation per round trip, and a call on
//     an open connection is not retried by dialling first;
//   - the node's background calls (the capability probe, the script load,
//     identification) are not sent while the last dial of the client's
//     address was refused and no dial connected since (see refusing): the
//     pool's probe connects quietly first (QuietDial), which lifts it.
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
	// nodes are the Redis nodes over the client that are running (between
	// their first call and Close): each is told of a refusal.
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

// listen adds r to the nodes told of refusals, or removes it.
func (d *dials) listen(r *Redis, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !on {
		delete(d.ref.nodes, r)
		return
	}
	if d.ref.nodes == nil {
		d.ref.nodes = map[*Redis]struct{}{}
	}
	d.ref.nodes[r] = struct{}{}
}

// OnRefused sets f, told of each refused dial of the node's client, on
// the dialling goroutine, while the node runs (from its first call to
// Close): f must not block. Set it before the first call. Only a client of
// one server is watched (see above).
func (n *Redis) OnRefused(f func(err error)) { n.onRefused = f }

// single reports whether the node's client is watched for refusals.
func (n *Redis) single() bool { return n.solo }

// isSingle reports whether n's client is a client of one server, whose
// dials are watched (see NewRedis).
func (n *Redis) isSingle() bool {
	_, ok := n.client.(*redis.Client)
	return ok && n.dials != nil && n.master == nil && n.address != FailoverAddr
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
// guarded calls in flight with it, and tells the listener.
func (n *Redis) dialRefused(err error) {
	n.guards.mu.Lock()
	for _, cancel := range n.guards.calls {
		cancel(err)
	}
	clear(n.guards.calls)
	n.guards.mu.Unlock()
	if n.onRefused != nil {
		n.onRefused(err)
	}
}

// guards are a node's calls in flight that a refusal ends (see guard).
type guards struct {
	mu    sync.Mutex
	next  uint64
	calls map[uint64]context.CancelCauseFunc
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
	g := &n.guards
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
	rep := r.Run(ctx, n.client)
	unguard()
	if cause := refusedCause(ctx); cause != nil && errors.Is(rep.Err, context.Canceled) {
		rep.Err = cause
	}
	return rep
}

// refusedAll gives every command of batch that a refusal cancelled (see
// guard) the refusal as its error: go-redis answers it context.Canceled,
// which would read as the caller's.
func refusedAll(batch []*call, cause error) {
	for _, c := range batch {
		for _, cmd := range c.cmds {
			if errors.Is(cmd.Err(), context.Canceled) {
				cmd.SetErr(cause)
			}
		}
	}
}

// knock dials the node quietly (see QuietDial) before its first
// background calls when no connection of its client has answered yet: a
// host that refuses is then found so without them (they are skipped, see
// refusing), where each would have been a go-redis call that logs its
// failed dials. Bounded by a second, and cut short by Close.
func (n *Redis) knock() {
	if !n.single() || n.dials.answered.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	done := make(chan struct{})
	n.wg.Go(func() { // Close must not wait out a silent node's dial
		select {
		case <-n.stop:
			cancel()
		case <-done:
		}
	})
	_ = n.QuietDial(ctx)
	close(done)
	cancel()
}
