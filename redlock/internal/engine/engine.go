package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/redlock-go/redlock/internal/jitter"
	"github.com/redlock-go/redlock/internal/life"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/waitq"
)

// The engine: what every primitive of a Redlock runs on, apart from the
// public API. It holds the pool of nodes, this process's waiters, the
// nodes' identities, the clock, and the lifetime of everything it starts;
// the primitives and the rules hold the engine, never the Redlock.

// Engine is shared by every primitive of one Redlock.
type Engine struct {
	Pool *quorum.Pool
	now  quorum.Clock
	// report tells the Redlock's Observer of background node failures.
	Report quorum.ReportFunc
	// nodeErr is node i's failure with err, as the facade reports it.
	nodeErr func(i int, err error) error

	life life.Group // operations, renewals, identification; closing stops renewal and identification
	// workers run renewal's extensions (see Work), counted in life.
	workers life.Workers
	// due is renewal's lines of extensions falling due (see Due).
	due dueLines
	// leases are the leases held, each with its token: close ends them,
	// and their loss timers with them. Guarded by leasesMu, recorded only
	// while life is open (life.While), so that close, which stops life
	// first, finds every lease recorded before.
	leasesMu sync.Mutex
	leases   map[Held]string

	Waiters *waitq.Queue // waiting Locks and their subscriptions
	IDs     *identifier  // who each node is (see identify.go)

	// sharded is set when some node is a Redis Cluster or Ring: keys a
	// lock keeps beside its name must hash to the name's slot there.
	Sharded bool

	Features *features // the optional features each node refused (see refused.go)
	// admit is what every acquisition passes first: the facade's audit
	// (nil: none).
	admit Admission

	Guard    *quorum.ClockGuard // the nodes' clocks (see quorum.ClockGuard); nil: no check
	watching bool               // the clock watcher runs; guarded by leasesMu
}

// Config is what an engine is made with, whole at construction.
type Config struct {
	// Tolerance is the clock guard's (0: no guard).
	Tolerance time.Duration
	// Report tells of background node failures (nil: none).
	Report quorum.ReportFunc
	// NodeErr makes a node's failure in an operation's error.
	NodeErr func(i int, err error) error
	// Admission makes, given the engine, what every acquisition passes
	// first (nil: none).
	Admission func(*Engine) Admission
	// Watch is told of each node going down or coming back (nil: none).
	Watch func(i int, down bool, since time.Time, cause error)
	// Now is the one clock every part of the engine reads (nil:
	// time.Now).
	Now quorum.Clock
}

// Maker makes node i of an engine, with the hooks through which the node
// tells the engine what it finds.
type Maker func(i int, hooks node.Config) node.Node

// Made is the Maker of nodes already made, which tell nothing (fakes).
func Made(nodes []node.Node) Maker {
	return func(i int, _ node.Config) node.Node { return nodes[i] }
}

// NewEngine returns the engine of n nodes, each made by mk, the rest made
// as c says.
func NewEngine(n int, mk Maker, c Config) *Engine {
	tolerance := c.Tolerance
	e := &Engine{now: c.Now, leases: map[Held]string{}, Report: c.Report, nodeErr: c.NodeErr}
	// At most as many extensions in flight as a node's workers carry in
	// one round trip each: the extensions of thousands of locks, due
	// together, wait their turn here rather than fill the nodes' queues
	// (node.QueueLen) and turn Lock and Unlock away, and go as fast as
	// the nodes take them.
	e.workers.G, e.workers.Max = &e.life, node.Workers*node.MaxBatch
	if e.now == nil {
		e.now = time.Now
	}
	nodes := make([]node.Node, n)
	for i := range nodes {
		hooks := node.Config{Now: e.now, OnWay: func(w node.Way, why error) { e.scriptsOff(i, w, why) }}
		if tolerance > 0 {
			hooks.OnNoClock = func(why error) { e.featureOff(i, FeatureClock, why) }
		}
		nodes[i] = mk(i, hooks)
	}
	if tolerance > 0 {
		e.Guard = quorum.NewClockGuard(len(nodes), tolerance, func(i int, err error) {
			if e.Report != nil {
				e.Report(context.Background(), i, fmt.Errorf("redlock: the node does not vote until its clock agrees again: %w", err), false)
			}
		}, e.clockJumped)
	}
	e.Pool = quorum.NewPool(nodes, quorum.PoolConfig{
		Now: e.now, Report: e.Report, Guard: e.Guard, Watch: c.Watch,
		Back: func(i int) { e.IDs.again(i) }, // e.IDs is made below, before any request
	})
	e.Features = newFeatures(len(nodes))
	e.IDs = newIdentifier(e.Pool, e.now, e.featureOff)
	e.Waiters = waitq.New(nodes, waitq.Config{
		Deliver: e.sendQueue,
		Off:     func(i int, err error) { e.featureOff(i, FeatureQueue, err) },
		Orphan:  e.orphan,
		Now:     e.now,
	})
	for _, n := range nodes {
		e.Sharded = e.Sharded || n.Layout().Sharded
	}
	if c.Admission != nil {
		e.admit = c.Admission(e)
	}
	return e
}

// Now reads the engine's clock.
func (e *Engine) Now() time.Time { return e.now() }

// Admission is what every acquisition passes first.
type Admission interface {
	// Admit refuses an acquisition that needs q nodes (0: a majority),
	// or lets it go on.
	Admit(ctx context.Context, q int) error
	// Attempted is told when an attempt admitted ended.
	Attempted()
}

// Open returns ErrClosed once the engine is closed.
func (e *Engine) Open() error {
	if e.life.Closed() {
		return ErrClosed
	}
	return nil
}

// Track registers a goroutine about to start (an operation, a renewal),
// unless the engine is closed; it calls [Engine.Untrack] when it returns.
func (e *Engine) Track() error {
	if !e.life.Enter() {
		return ErrClosed
	}
	return nil
}

// Untrack ends one goroutine [Engine.Track] registered.
func (e *Engine) Untrack() { e.life.Done() }

// Work runs f on one of the engine's workers, which it keeps for a
// second after their last work, node.Workers*node.MaxBatch at most: the
// rest wait their turn, the one whose by is soonest first (see
// life.Workers). Once the engine is closing it may still run f, on a
// worker that has not returned yet, or report false and run nothing.
// Renewal makes there the extensions that cannot go with others (see
// ExtendAll), by the time each lease would count as lost.
func (e *Engine) Work(by time.Time, f func()) bool { return e.workers.Go(by, f) }

// Closing is closed once the engine is closing: renewal and
// identification stop.
func (e *Engine) Closing() <-chan struct{} { return e.life.Closing() }

// Sleep waits for d, or until close; it reports whether d passed.
func (e *Engine) Sleep(d time.Duration) bool { return jitter.Sleep(d, e.life.Closing()) }

// Held is a lease the engine keeps while it is held.
type Held interface {
	// End ends the lease with cause: the engine closed, or a clock jump
	// left too few of the nodes that granted it.
	End(cause error)
	// Jumped is told that node i's clock jumped, the guard's count of
	// each node's jumps being jumps: it returns why the lease is lost
	// (nil: it still holds).
	Jumped(i int, jumps []int) error
}

// Record records lease h of token, and reports false, recording nothing,
// once the engine is closed.
func (e *Engine) Record(h Held, token string) bool {
	return e.life.While(func() {
		e.leasesMu.Lock()
		e.leases[h] = token
		watch := e.Guard != nil && !e.watching
		e.watching = e.watching || watch
		e.leasesMu.Unlock()
		if watch {
			e.life.Go(e.watchClocks)
		}
	})
}

// Forget forgets lease h.
func (e *Engine) Forget(h Held) {
	e.leasesMu.Lock()
	delete(e.leases, h)
	e.leasesMu.Unlock()
}

// ErrRedlockClosed is why close ends the leases still held: their keys stay
// on the nodes until their TTL, but nothing keeps or watches them any
// more.
var ErrRedlockClosed = fmt.Errorf("%w: the Redlock was closed", ErrLockLost)

// Close stops new operations and renewal, ends the leases still held, and
// waits for every goroutine the engine started, in order: the waiters'
// goroutines use the pool, operations use both, and the pool's calls in
// flight outlive the operations that sent them. Then it closes the nodes.
//
// A node call is waited for as long as the library could still be
// waiting for it: the longest node timeout in use, and a probe's timeout,
// after the operations ended. A call its client holds longer (a dial that
// go-redis retries for many seconds, detached from any context) is left to
// the client: the nodes' workers are stopped without waiting for it, and
// it ends at the client's own timeout. When ctx ends first, Close still
// stops everything and returns ctx's error, saying what was still running
// (see life.Group.Wait: every component closes this way).
func (e *Engine) Close(ctx context.Context) error {
	e.life.Stop()
	e.due.stop()
	e.leasesMu.Lock()
	leases := e.leases
	e.leases = map[Held]string{}
	e.leasesMu.Unlock()
	for h := range leases {
		h.End(ErrRedlockClosed)
	}
	// Each stops at once and waits until ctx ends: once it has, the
	// next ones stop without waiting.
	err := e.Waiters.Close(ctx)
	err = cmp.Or(err, e.life.Wait(ctx))
	err = cmp.Or(err, e.IDs.Close(ctx))
	what, calls := "operations", ctx
	if err == nil {
		what = "node calls"
		var cancel context.CancelFunc
		calls, cancel = context.WithTimeout(ctx, e.Pool.Longest()+quorum.ProbeTimeout)
		defer cancel()
	}
	// A call left in flight past calls' end is held by its client past any
	// wait of ours: only ctx's end is an error.
	left := e.Pool.Close(calls)
	if ctx.Err() == nil || err == nil && left == nil {
		return nil
	}
	err = fmt.Errorf("redlock: close: %w (waiting for %s)", ctx.Err(), what)
	if left != nil {
		err = errors.Join(err, fmt.Errorf("redlock: close: %w", left))
	}
	return err
}

// sendQueue sends the waiters' queue changes, ops[i] to node i (nil:
// nothing), every node at once, and returns once each answered or timeout
// passed, with each node's reply: the fan-out internal/waitq is handed.
func (e *Engine) sendQueue(ops []node.Op, timeout time.Duration) []node.Reply {
	rd := e.postQueue(ops, timeout, 0)
	_ = rd.Gather(context.Background())
	return rd.Replies
}

// postQueue sends ops as sendQueue does, and returns the round that
// gathers their replies: each is on its way to its node (and ahead of
// anything sent there after) when it returns. A release that could not
// be delivered is owed to its node for owe (0: dropped).
func (e *Engine) postQueue(ops []node.Op, timeout, owe time.Duration) *quorum.Round {
	report := e.Report
	if report != nil {
		// A refusal for good turns the queue off on the node, which
		// reports it once (see featureOff).
		report = func(ctx context.Context, i int, err error, late bool) {
			if !errors.Is(err, node.ErrMisconfigured) {
				e.Report(ctx, i, err, late)
			}
		}
	}
	rd := quorum.NewRound(context.Background(), e.Pool, timeout, report, e.Pool.Size()).KeepReplies()
	rd.OweFor = owe
	for i, op := range ops {
		rd.Post(i, op, nil, func(int) bool { return op != nil }, false, false)
	}
	return rd
}
