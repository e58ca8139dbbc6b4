package node

import (
	"context"
	"errors"
	"syscall"
	"time"
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
// A transport that watches its dials says so (Watched); go-redis' watches
// only a client of one server (not a Cluster, a Ring, or a
// Sentinel-managed client, whose servers come and go on their own).

// Watched is a Transport that watches its dials for refusals (see above).
type Watched interface {
	DialWatcher
	// Refusing returns the latest refused dial while no dial has connected
	// since; nil otherwise, and for a client not watched.
	Refusing() error
	// Listen has f told of each refused dial, on the dialling goroutine,
	// until done is closed; the calls in flight it guards end first.
	Listen(f func(err error), done <-chan struct{})
	// Knock dials the server quietly, within ctx, unless a connection has
	// answered: a host that refuses is then found so without a call that
	// logs its failed dials.
	Knock(ctx context.Context)
	// Guard returns ctx, cancelled with the refusal as its cause when a
	// dial is refused while the call runs, and the function that ends the
	// guard once the call returned (ctx itself when there is nothing to
	// guard: see above).
	Guard(ctx context.Context) (context.Context, func())
}

// OnRefused sets f, told of each refused dial of the node's client, on
// the dialling goroutine, while the node runs (from its first call to
// Close): f must not block. Set it before the first call. Only a client of
// one server is watched (see above).
func (n *Redis) OnRefused(f func(err error)) { n.onRefused = f }

// watched returns the node's transport when it watches its dials.
func (n *Redis) watched() Watched {
	w, _ := n.via.(Watched)
	return w
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
	if w := n.watched(); w != nil {
		return w.Refusing()
	}
	return nil
}

// dialRefused is told of a refused dial of the node's client (after the
// guarded calls in flight ended with it): it tells the listener.
func (n *Redis) dialRefused(err error) {
	if f := n.onRefused; f != nil && !n.closed() {
		f(err)
	}
}

// background runs the node's first background calls, on a goroutine of
// its own: it listens for refusals, knocks, and unless the host refused,
// asks the node's Caps and loads the scripts (see run).
func (n *Redis) background(name string) {
	if w := n.watched(); w != nil {
		w.Listen(n.dialRefused, n.life.Closing())
		n.knock(w)
		if w.Refusing() != nil {
			return // found down: Caps unknown, as when the probe fails; the scripts load at the first NOSCRIPT
		}
	}
	n.life.Go(func() { n.probeCaps(name) })
	n.loadScripts()
}

// knock has w knock before the node's first background calls (see
// Watched.Knock), bounded by a second, and cut short by Close.
func (n *Redis) knock(w Watched) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	done := make(chan struct{})
	n.life.Go(func() { // Close must not wait out a silent node's dial
		select {
		case <-n.life.Closing():
			cancel()
		case <-done:
		}
	})
	w.Knock(ctx)
	close(done)
	cancel()
}

// guard is the transport's Guard, for a node whose transport watches its
// dials.
func (n *Redis) guard(ctx context.Context) (context.Context, func()) {
	if w := n.watched(); w != nil {
		return w.Guard(ctx)
	}
	return ctx, func() {}
}

// refusedCause returns the refusal that ended ctx, a guarded context (see
// guard); nil when none did.
func refusedCause(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, syscall.ECONNREFUSED) {
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
