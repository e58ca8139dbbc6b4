package node

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/jitter"
	"github.com/redlock-go/redlock/internal/life"
)

// Redis is a Node over a Transport (package goredis is go-redis'). It
// batches: a few worker
// goroutines each take the requests waiting in the idle lanes (see lanes)
// and send them as one pipeline, one round trip. A lone caller's request
// leaves at once, alone; under load, requests that arrive while a round
// trip is in flight share the next one, which is where most of the cost of
// a lock lies (system calls and server wake-ups per round trip, not bytes).
//
// A lock name always travels the same lane (see Laned), and a lane's next
// batch leaves only once its previous one returned, so a name's operations
// are applied in the order Do was called for them: a release handed over
// before the next acquisition lands first (the batch may even carry both).
// The queue is bounded: a request that finds it full fails at once,
// unsent, so that a stalled node costs neither goroutines nor memory. The
// workers start with the first request; Close stops them and waits for
// them.
type Redis struct {
	via    Transport // how commands reach the node (see package goredis)
	layout Layout
	start  sync.Once
	lanes  lanes
	spread atomic.Uint32 // picks the lane of an operation that has none
	life   life.Group    // the workers, the Runners, the background loads
	now    func() time.Time

	// way is how the node is spoken to (a Way); see way.go.
	way     atomic.Uint32
	refusal atomic.Pointer[error] // the node's refusal of scripts, once seen
	probe   sync.Once             // asks once for the node's Caps
	caps    atomic.Pointer[Caps]  // what the probe found; nil until it answered
	forced  atomic.Bool           // the way was set, not found: no probe
	told    sync.Once             // onWay is called once

	onNoClock func(why error)
	clockOff  sync.Once // onNoClock is called once
	// clockOn is set once a batch's TIME was answered: the node's user may
	// run it, and a plain grant's script reads it itself (see clockFor).
	clockOn atomic.Bool
	onWay   func(w Way, why error)
	// scriptsRan is set once a batch's scripts ran (none was refused):
	// from then on a node that speaks scripts carries a plain grant and
	// extension in the server's own commands where it has SET IFEQ (see
	// speech.beside), which no refusal of scripts can then split from
	// the name's scripted calls of the same batch.
	scriptsRan atomic.Bool
	// cached is set once the node is known to hold every script (a SCRIPT
	// LOAD of them all returned), and cleared when it answers NOSCRIPT
	// (it lost them: a restart, a failover), which loads them all again
	// (see loadScripts); loading guards that load.
	cached    atomic.Bool
	loading   atomic.Bool
	onRefused func(err error) // told of refused dials (see OnRefused)
}

// Batching limits. Workers bounds the round trips in flight per node (and
// the connections the queue holds): two, so that requests arriving while
// one round trip is in flight leave together in the next, which costs the
// node and the client one read and one write per batch rather than per
// request (four cost about a third more CPU per lock+unlock pair at 64
// goroutines; one lost a fifth of the throughput against containers, with
// no second round trip to overlap a slow one: see docs/PERFORMANCE.md).
// MaxBatch bounds one pipeline; QueueLen bounds the requests waiting in
// all lanes.
const (
	Workers  = 2
	MaxBatch = 128
	QueueLen = 4 * MaxBatch
)

// call is one request waiting for its round trip.
type call struct {
	ctx    context.Context //nolint:containedctx // a request in flight: its values travel with it
	sendBy time.Time
	op     Op
	cmds   []Cmd
	buf    [2]Cmd
	done   func(Reply)
	// native is set when cmds are the server's own commands (see
	// native.go), not the operation's script.
	native bool
	lane   int
}

var callPool = sync.Pool{New: func() any { return new(call) }}

// Config is what a Redis node is made with, whole at construction.
type Config struct {
	Now       func() time.Time       // the clock (nil: time.Now)
	NoScripts bool                   // speak without scripts from the first request (see Way)
	OnWay     func(w Way, why error) // told once when the node stops speaking scripts because it refused them, with the refusal (nil: none)
	OnNoClock func(why error)        // told once when the node refuses TIME for good (nil: none)
}

// NewOver returns the Node whose commands travel over t, made as cfg says.
// No I/O.
func NewOver(t Transport, cfg Config) *Redis {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	n := &Redis{
		via: t, layout: Layout{Sharded: t.Sharded()}, now: now,
		onWay: cfg.OnWay, onNoClock: cfg.OnNoClock,
	}
	if cfg.NoScripts {
		n.way.Store(uint32(Transactions)) // Native once the probe finds the server's own commands (see Caps)
	}
	n.lanes.init()
	return n
}

// Addr implements Node: the transport's.
func (n *Redis) Addr() string { return n.via.Addr() }

// Subscribe implements Node: the transport's.
func (n *Redis) Subscribe() Subscription { return n.via.Subscribe() }

// Layout implements Node.
func (n *Redis) Layout() Layout { return n.layout }

// Do implements Node.
func (n *Redis) Do(ctx context.Context, sendBy time.Time, op Op, done func(Reply)) {
	if m, ok := op.(*Extensions); ok && n.layout.Sharded {
		// The keys may live on different servers: each its own call.
		DoEach(m, func(e Op, done func(Reply)) { n.Do(ctx, sendBy, e, done) }, done)
		return
	}
	n.start.Do(func() { n.run(LaneOf(op)) })
	c := callPool.Get().(*call)
	c.ctx, c.sendBy, c.op, c.done = ctx, sendBy, op, done
	if r, ok := op.(Runner); ok {
		// On its own goroutine, at once: a Runner asks several servers
		// and must not wait behind the workers' batches (the first
		// acquisition waits for who the nodes are).
		select {
		case <-n.life.Closing():
			c.finish(Reply{Err: ErrClosed})
		default:
			n.life.Go(func() { c.finish(n.runGuarded(ctx, r)) })
		}
		return
	}
	if w := n.Way(); w != Scripts || n.scriptsRan.Load() {
		if o, ok := op.(nativeOp); ok {
			c.cmds, c.native = o.encodeNative(speech{way: w, caps: n.Caps()}, c.buf[:0])
		}
	}
	if !c.native {
		c.cmds = op.Encode(n.layout, c.buf[:0])
	}
	if len(c.cmds) == 0 && !isTimed(op) {
		c.finish(op.Decode(nil)) // nothing to send
		return
	}
	c.lane = laneOf(op, n.spread.Add(1))
	if err := n.lanes.put(c.lane, c); err != nil {
		c.finish(Reply{Err: err})
	}
}

// Ping implements Node: the transport's, beside the queue, since the
// workers may all be stuck on a silent node.
func (n *Redis) Ping(ctx context.Context) error { return n.via.Ping(ctx) }

// run starts the workers, asks the node's Caps (with a key beside name,
// the first lock name it is asked about), and loads the scripts into the
// node's cache so that EVALSHA in a pipeline finds them (a node that is
// down or restarts answers NOSCRIPT, and send falls back to EVAL, which
// loads them).
func (n *Redis) run(name string) {
	n.life.Go(func() { n.background(name) })
	for range Workers {
		n.life.Go(n.work)
	}
}

// work is one worker: a batch of the idle lanes' calls, its round trip,
// then the next, until the node stops.
func (n *Redis) work() {
	batch := make([]*call, 0, MaxBatch)
	taken := make([]int, 0, Lanes)
	var toks []laneToken
	w := &worker{}
	for {
		// The calls its last round trip answered woke their callers,
		// whose next requests (an Unlock after a grant, the next
		// TryLock) are about to be queued: yielding first lets them
		// join this batch rather than leave one round trip each. At 64
		// goroutines a pair then costs the client 0.91x and the servers
		// 0.85x (docs/PERFORMANCE.md); a lone caller, with nothing else
		// to run, loses nothing.
		jitter.Yield()
		var ok bool
		batch, taken, toks, ok = n.lanes.take(batch[:0], taken[:0], toks[:0])
		if !ok {
			return
		}
		n.send(w, batch)
		n.lanes.done(taken, toks)
	}
}

// worker is what a worker keeps from one round trip to the next.
type worker struct {
	cmds  []*Cmd
	lead  Cmd // a PING that leads the pipeline (see leadsNil)
	clock Cmd // the TIME that ends it (see clockFor)
}

// send makes one round trip for batch and hands each call its reply. Calls
// whose sendBy has passed are answered ErrUnsent without being sent.
func (n *Redis) send(w *worker, batch []*call) {
	var rest []*call
	if n.Way() != Scripts {
		batch, rest = pipelinable(batch)
		defer n.transactAll(rest)
	}
	now := n.now()
	live := batch[:0]
	for _, c := range batch {
		if now.After(c.sendBy) {
			c.finish(Reply{Err: fmt.Errorf("%w: the node timeout passed in the queue", ErrUnsent)})
			continue
		}
		live = append(live, c)
	}
	if len(live) > 1 && !n.cached.Load() {
		evalAhead(live[0].ctx, live)
	}
	if len(live) > 0 {
		n.roundTrip(w, live)
	}
}

// exchange sends the commands of batch in one round trip, ended by TIME
// when a call is Timed, and returns the node's time then (zero when not
// asked), or the transport's error that voids every reply.
func (n *Redis) exchange(ctx context.Context, w *worker, batch []*call) (time.Time, error) {
	var clock *Cmd
	asked := n.clockFor(batch)
	if asked {
		w.clock = Cmd{Args: timeArgs}
		clock = &w.clock
	}
	all := w.cmds[:0]
	if leadsNil(batch) {
		// go-redis (the transport of this module) runs its retry checks
		// (a dozen allocations) on the error of a round trip's first
		// reply, and reads a native grant's nil as one: a command whose
		// reply is no error leads instead,
		// the batch's TIME where the node has answered one, else a PING.
		if clock != nil && n.clockOn.Load() {
			all = append(all, clock)
			clock = nil
		} else {
			w.lead = Cmd{Args: pingArgs}
			all = append(all, &w.lead)
		}
	}
	all = appendCmds(all, batch)
	if clock != nil {
		all = append(all, clock)
	}
	err := n.via.Batch(ctx, all)
	clear(all)
	w.cmds = all[:0]
	if err != nil {
		return time.Time{}, err
	}
	if !asked {
		return time.Time{}, nil
	}
	return n.readClock(&w.clock), nil
}

// roundTrip sends the commands of batch in one round trip.
func (n *Redis) roundTrip(w *worker, batch []*call) {
	// No deadline: the client's own timeouts bound the round trip. A
	// context deadline would make go-redis close the connection when it
	// passes (with ContextTimeoutEnabled), and re-dial for the next call:
	// to a far node, on nearly every call.
	ctx, unguard := n.guard(batch[0].ctx)
	defer unguard()
	at, err := n.exchange(ctx, w, batch)
	if err != nil {
		for _, c := range batch {
			c.finish(Reply{Err: err}) // unsent, or applied perhaps on a shard that may not hold the key
		}
		return
	}
	at = refusedAll(ctx, batch, at)
	refused := n.checkScripts(ctx, batch)
	var again []*call
	var open openCalls
	for _, c := range batch {
		if refused && slices.ContainsFunc(c.cmds, refusesScripts) {
			// The node ran none of this call's scripts: it goes again,
			// without them, in the order of the batch.
			again = append(again, c)
			continue
		}
		if !c.native {
			if !refused && !n.scriptsRan.Load() {
				n.scriptsRan.Store(true) // see Do: the plain lock may speak natively beside scripts
			}
			if o, ok := c.op.(*Extensions); ok {
				n.answerExtensions(c, o, at)
				continue
			}
			c.finish(n.timed(c.op, c.op.Decode(c.cmds), at))
		} else if rep, done := open.decode(c); done {
			c.finish(n.timed(c.op, rep, at))
		}
	}
	open.ask(ctx, n, at)
	n.transactAll(again)
}

// refusesScripts reports whether cmd was refused as a script (see
// scriptsRefused).
func refusesScripts(cmd Cmd) bool { return scriptsRefused(cmd.err) }

// timed gives rep, the reply to op, the node's time at, read at the end
// of its round trip, when op is Timed and its reply carries none.
func (n *Redis) timed(op Op, rep Reply, at time.Time) Reply {
	if isTimed(op) && (rep.Time.IsZero() || n.layout.Sharded) {
		rep.Time = at // a sharded layout's carries none (see clockFor)
	}
	return rep
}

// finish hands c's reply to its callback and recycles c.
func (c *call) finish(rep Reply) {
	done := c.done
	*c = call{}
	callPool.Put(c)
	done(rep)
}

// Close implements Node: each worker returns after the round trip it is
// in, which a silent node's client may hold until its own read timeout;
// the calls still queued are answered ErrClosed. Closing again waits
// again.
func (n *Redis) Close(ctx context.Context) error {
	if n.life.Stop() {
		for _, c := range n.lanes.stop() {
			c.finish(Reply{Err: ErrClosed})
		}
	}
	return n.life.Wait(ctx)
}

// appendCmds appends the commands of each call of batch to all.
func appendCmds(all []*Cmd, batch []*call) []*Cmd {
	for _, c := range batch {
		for i := range c.cmds {
			all = append(all, &c.cmds[i])
		}
	}
	return all
}

// ScriptsCached reports whether the node is known to hold every script.
func (n *Redis) ScriptsCached() bool { return n.cached.Load() }
