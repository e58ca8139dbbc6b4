package goredis

import (
	"context"
	"errors"
	"sync"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/node"
)

// The go-redis transport's watch of refused dials (see refusal.go for what
// the node does of them).

// refusal is what a client's dials say of refusals, per client (shared by
// every transport over it). Guarded by the dials' mu.
type refusal struct {
	// last is the latest refused dial, by its number (refusedN), until a
	// dial started after it connected (connectedN); nil then.
	last       *node.DialFailure
	refusedN   uint64
	connectedN uint64
	// heard are the transports over the client whose nodes listen (from
	// their first call), each told of a refusal until its node is closed.
	heard map[*Transport]struct{}
}

// refusedDial reports whether err is a dial refused by the server's host.
func refusedDial(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// refused records dial number n, refused with f, and tells the transports over
// the client, unless a dial started after it has connected.
func (d *dials) refused(n uint64, f *node.DialFailure) {
	d.mu.Lock()
	if n < d.ref.connectedN || n < d.ref.refusedN {
		d.mu.Unlock()
		return
	}
	d.ref.last, d.ref.refusedN = f, n
	heard := make([]*Transport, 0, len(d.ref.heard))
	for g := range d.ref.heard {
		if g.deaf() {
			delete(d.ref.heard, g)
			continue
		}
		heard = append(heard, g)
	}
	d.mu.Unlock()
	for _, g := range heard {
		g.dialRefused(n, f.Err)
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

// listen adds g to the transports told of refusals, and drops those whose
// nodes closed since (Close does not reach the dials: they go at the next
// listen or refusal).
func (d *dials) listen(g *Transport) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ref.heard == nil {
		d.ref.heard = map[*Transport]struct{}{}
	}
	for o := range d.ref.heard {
		if o.deaf() {
			delete(d.ref.heard, o)
		}
	}
	d.ref.heard[g] = struct{}{}
}

// guards are the calls in flight a refused dial ends (see Guard).
type guards struct {
	mu    sync.Mutex
	next  uint64
	calls map[uint64]guarded
}

// guarded is a call in flight: its cancel, and the number of dials begun
// before it was guarded. A dial begun before the call cannot be the
// call's own: its refusal, told late (the dialling goroutine was slow to
// run), says nothing of a server that has come up since and must not end
// the call.
type guarded struct {
	cancel context.CancelCauseFunc
	since  uint64
}

// listener is who a transport tells of refused dials, until done.
type listener struct {
	f    func(err error)
	done <-chan struct{}
}

// single reports whether the client is watched for refusals: a client of
// one server.
func (g *Transport) single() bool {
	_, ok := g.c.(*redis.Client)
	return ok && g.dials != nil && g.master == nil && g.address != FailoverAddr
}

// Refusing implements Watched.
func (g *Transport) Refusing() error {
	if !g.single() {
		return nil
	}
	return g.dials.refusing()
}

// Listen implements Watched: a client of one server only.
func (g *Transport) Listen(f func(err error), done <-chan struct{}) {
	g.heard.Store(&listener{f: f, done: done})
	if g.single() {
		g.dials.listen(g)
	}
}

// deaf reports whether no one listens to g any more.
func (g *Transport) deaf() bool {
	l := g.heard.Load()
	if l == nil {
		return true
	}
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Knock implements Watched: a quiet dial (see QuietDial) unless a
// connection of the client has answered.
func (g *Transport) Knock(ctx context.Context) {
	if g.single() && !g.dials.answered.Load() {
		_ = g.QuietDial(ctx)
	}
}

// dialRefused ends the guarded calls in flight with err, the refusal of
// dial number n, unless they were guarded after it began, and tells the
// listener; nothing once its node is closed.
func (g *Transport) dialRefused(n uint64, err error) {
	if g.deaf() {
		return
	}
	r := &g.guards
	r.mu.Lock()
	for id, c := range r.calls {
		if c.since < n {
			c.cancel(err)
			delete(r.calls, id)
		}
	}
	r.mu.Unlock()
	g.heard.Load().f(err)
}

// Guard implements Watched. The context is ctx itself for a client not
// watched, and for one whose last dial answered: the guard costs an
// allocation per round trip.
func (g *Transport) Guard(ctx context.Context) (context.Context, func()) {
	if !g.single() || g.dials.answered.Load() {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	r := &g.guards
	r.mu.Lock()
	if r.calls == nil {
		r.calls = map[uint64]guarded{}
	}
	r.next++
	id := r.next
	r.calls[id] = guarded{cancel: cancel, since: g.dials.started.Load()}
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		delete(r.calls, id)
		r.mu.Unlock()
		cancel(nil)
	}
}
