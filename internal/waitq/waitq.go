// Package waitq is this process's waiting callers: who waits on which
// lock name, their places in the queues of waiters kept on the nodes, the
// subscriptions that hear releases, and who is woken when one is
// announced.
//
// A waiting Lock joins the lock's queue of waiters on every node (a sorted
// set of waiter ids, scored by when each started waiting: ZADD NX, so a
// waiter queued again keeps its place). A release that frees the lock pops
// the oldest waiter from each node's queue and announces itself to that
// waiter's process only, on the process's own channel; with no one popped
// (a reader's turn, a writer's release, a user refused ZPOPMIN) it
// announces itself on the lock's channel, to every waiter, and a plain
// lock's release with no one queued announces nothing. A Queue
// holds one subscription per node, opened when a Lock first waits, and one
// dispatcher goroutine per subscription that wakes waiters:
//
//   - A release names one waiter: only that one tries, so waiters take
//     turns in the order they came instead of all hitting every node at
//     once for a lock only one of them can get. Nodes whose queues differ
//     (a registration missed one) may name two; the split-vote rule sorts
//     them out. A named waiter whose attempt fails queues again at its old
//     place.
//   - The same release arrives from every node that held the lock; only the
//     first copy wakes anyone (the payload, a token unique to the
//     acquisition or to the reentrant release, tells copies apart).
//   - A release on the lock's channel (no one named) wakes only the
//     longest-waiting Lock of this process on that name.
//   - Subscribing, unsubscribing, queueing and unqueueing go through one
//     goroutine per node, which brings its node to the waiters of now,
//     however many came and went meanwhile: a silent node holds that one
//     goroutine, not one per waiter, and delays no other node's queue. A
//     name's subscription lingers for Linger after its last waiter.
//   - Announcements can be lost (a node down, a subscription reconnecting,
//     a release published before the SUBSCRIBE took effect, a named waiter
//     that died): every waiter still polls on its back-off, which bounds the
//     cost of a lost announcement to one back-off.
//   - A release that reached waiters lingers for the nodes about as fast as
//     its quorum, and its process lets them go first (courtesy.go).
//
// It knows nothing of quorums, validity or leases: it tells callers when
// to try, and whether a try wins is the caller's attempt
// (redlock/internal/turn, over the engine).
package waitq

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/redlock-go/redlock/internal/jitter"
	"github.com/redlock-go/redlock/internal/life"
	"github.com/redlock-go/redlock/internal/node"
)

// Linger is how long a name's subscription outlives its last waiter: a
// process that locks the same name again and again keeps it, instead of
// unsubscribing and subscribing around every acquisition (and missing the
// announcements sent in between).
const Linger = 5 * time.Second

// queueTTL is how long a lock's queue of waiters outlives its last
// registration on a node.
const queueTTL = time.Minute

// Deliver sends ops[i] to node i (nil: nothing for that node), every node
// at once, and returns once each answered or timeout passed, with each
// node's reply (a zero Reply for a node sent nothing or not answered in
// time): the layer above's fan-out.
type Deliver func(ops []node.Op, timeout time.Duration) []node.Reply

// Off is told, once per node, that the node refused the waiters' queue
// (an ACL user without ZADD, ZREM or the queue's key: an error wrapping
// node.ErrMisconfigured). The node's waiters are not queued from then on:
// its releases announce themselves to every waiter, who also poll.
type Off func(i int, err error)

// Queue is a process's registry of waiting callers and its subscriptions.
// It is safe for concurrent use. It owns its goroutines: Close stops them
// and waits for them.
type Queue struct {
	self    string // this process's waiters' id: the prefix of their queue members
	nodes   []node.Node
	deliver Deliver
	off     Off
	life    life.Group // the dispatchers, the sync and the sweep; closing: under mu
	now     func() time.Time
	orphan  Orphan

	mu       sync.Mutex
	subs     []*nodeSub // one per node once started; nil before
	names    map[string]*waitList
	syncing  []bool // per node: its sync goroutine runs
	sweeping bool   // the sweep goroutine runs
	timeout  time.Duration
	released map[string]released // see courtesy.go
}

// nodeSub is one node's subscription, the channels it should have, and
// the waiters queued on the node. Guarded by Queue.mu.
type nodeSub struct {
	s      node.Subscription
	have   map[string]bool    // subscribed, as far as the node was told
	queued map[string]*queued // waiter id → what the node was told
	// refused is set once the node refused the queue's commands: its
	// waiters are no longer queued there.
	refused bool
}

// queued is a waiter as one node's queue has it.
type queued struct {
	name   string
	gen    int
	popped bool // a release popped it: nothing to remove
}

// waitList is the callers of this process waiting on one name, oldest
// first.
type waitList struct {
	list []*Waiter
	idle time.Time // since when no one waits on the name; zero while one does
}

// Config is what a Queue is made with, whole at construction.
type Config struct {
	// Deliver sends the queue changes.
	Deliver Deliver
	// Off (nil: no one) is told of a node that refuses them.
	Off Off
	// Orphan (nil: no one, the keys stay until their TTL) is told of the
	// handoffs no waiter takes.
	Orphan Orphan
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// New returns the queue of a process over nodes, made as c says. It does
// no I/O.
func New(nodes []node.Node, c Config) *Queue {
	now := c.Now
	if now == nil {
		now = time.Now
	}
	return &Queue{self: uuid.NewString(), nodes: nodes, deliver: c.Deliver, off: c.Off, orphan: c.Orphan, now: now}
}

// Waiter is one waiting caller.
type Waiter struct {
	q    *Queue
	name string
	id   string // its member in the nodes' queues
	// reader says that it is a reader of a reader-writer lock: woken with
	// the other readers (see JoinReader).
	reader bool
	since  int64 // when it started waiting, Unix ms: its place in the queues
	wake   chan string
	// ttl is set for a waiter that takes the lock handed over (see
	// JoinHandoff), and handed receives each node's handoff.
	ttl    time.Duration
	handed chan node.Handed
	// Guarded by q.mu:
	gen   int    // bumped when it must be queued again
	woken string // the release that last woke it
	// token is what a handoff sets the key to (the member carries it).
	token string
}

// Wake receives the released token (or, for a reentrant lock, the
// release's id) when a release wakes the waiter; it holds at most one
// pending signal.
func (w *Waiter) Wake() <-chan string { return w.wake }

// Join registers a waiter on name, subscribing to its channel on every
// node when it is the first. Subscribing happens in the background, each
// node bounded by timeout: a down node costs nothing but its
// announcements. After Close, the waiter is never woken: it polls.
func (q *Queue) Join(name string, timeout time.Duration) *Waiter {
	return q.join(name, timeout, false, 0)
}

// JoinReader is Join for a reader of a reader-writer lock. Readers do not
// exclude one another: a release whose turn is a reader's wakes every
// reader waiting on the name, here and, through the name's channel, in
// every process (see announce.lua).
func (q *Queue) JoinReader(name string, timeout time.Duration) *Waiter {
	return q.join(name, timeout, true, 0)
}

func (q *Queue) join(name string, timeout time.Duration, reader bool, ttl time.Duration) *Waiter {
	id := node.WaiterMember(q.self, uuid.NewString(), reader)
	w := &Waiter{q: q, name: name, id: id, reader: reader, since: q.now().UnixMilli(),
		wake: make(chan string, 1), gen: 1}
	if ttl > 0 {
		w.ttl, w.handed = ttl, make(chan node.Handed, 2*len(q.nodes))
		w.renew()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.subs == nil && !q.start() {
		return w
	}
	l := q.names[name]
	if l == nil {
		l = &waitList{}
		q.names[name] = l
	}
	l.idle = time.Time{}
	l.list = append(l.list, w)
	q.sync(timeout)
	return w
}

// Requeue puts w back in the nodes' queues, at its old place: a release
// that named it popped it, and its attempt failed.
func (w *Waiter) Requeue(timeout time.Duration) {
	q := w.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.subs == nil {
		return
	}
	w.gen++
	if w.ttl > 0 {
		q.retire(w)
		w.renew()
	}
	q.sync(timeout)
}

// Member is w's member in the nodes' queues.
func (w *Waiter) Member() string {
	w.q.mu.Lock()
	defer w.q.mu.Unlock()
	return w.id
}

// Since is when w began waiting, Unix ms: its score in the nodes' queues.
func (w *Waiter) Since() int64 { return w.since }

// Leave unregisters w. When it was the last waiter on its name, the name's
// subscription lingers for Linger, then goes.
func (w *Waiter) Leave(timeout time.Duration) {
	q := w.q
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.names[w.name]
	if l == nil {
		return
	}
	for i, x := range l.list {
		if x == w {
			l.list = append(l.list[:i], l.list[i+1:]...)
			break
		}
	}
	if w.ttl > 0 {
		q.retire(w)
	}
	if q.subs != nil {
		q.sync(timeout) // out of the nodes' queues
	}
	if len(l.list) == 0 {
		l.idle = q.now()
		if !q.sweeping && !q.life.Closed() {
			q.sweeping = true
			q.life.Go(func() { q.sweep(timeout) })
		}
	}
}

// Listening reports whether this process's subscription to node i has
// name's channel: a release announced there reached it.
func (q *Queue) Listening(i int, name string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.subs != nil && q.subs[i].have[node.ReleaseChannel(name)]
}

// Waiting reports whether a caller of this process waits on name.
func (q *Queue) Waiting(name string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.names[name]
	return l != nil && len(l.list) > 0
}

// Close closes the subscriptions, which ends the dispatchers, stops the
// sync and the sweep, and waits for all of them until ctx ends.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	q.life.Stop()
	subs := q.subs
	q.mu.Unlock()
	for _, ns := range subs {
		_ = ns.s.Close()
	}
	return q.life.Wait(ctx)
}

// sweep drops the names no one has waited on for Linger, and their
// subscriptions; it returns once no name is idle, or on Close.
func (q *Queue) sweep(timeout time.Duration) {
	for {
		q.mu.Lock()
		next := q.dropIdle(timeout)
		if next == 0 {
			q.sweeping = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		if !jitter.Sleep(next, q.life.Closing()) {
			q.mu.Lock()
			q.sweeping = false
			q.mu.Unlock()
			return
		}
	}
}

// dropIdle drops the names idle for Linger and returns how long until the
// next one is, 0 when none is idle. Called with q.mu held.
func (q *Queue) dropIdle(timeout time.Duration) time.Duration {
	now := q.now()
	next := time.Duration(0)
	dropped := false
	for name, l := range q.names {
		if l.idle.IsZero() {
			continue
		}
		if left := l.idle.Add(Linger).Sub(now); left > 0 {
			if next == 0 || left < next {
				next = left
			}
			continue
		}
		delete(q.names, name)
		dropped = true
	}
	if dropped {
		q.sync(timeout)
	}
	return next
}

// start opens one subscription per node and their dispatchers. Called with
// q.mu held; false when the Queue is closed.
func (q *Queue) start() bool {
	if q.life.Closed() {
		return false
	}
	q.names = map[string]*waitList{}
	q.subs = make([]*nodeSub, len(q.nodes))
	q.syncing = make([]bool, len(q.nodes))
	wake := node.WakeChannel(q.self)
	for i, n := range q.nodes {
		s := n.Subscribe()
		q.subs[i] = &nodeSub{s: s, have: map[string]bool{}, queued: map[string]*queued{}}
		msgs := s.Messages()
		q.life.Go(func() {
			for m := range msgs {
				n := node.ParseNotice(m.Channel, m.Payload)
				if m.Channel == wake {
					q.popped(i, n.Member)
					if n.Handed {
						q.handOver(i, n)
						continue
					}
				}
				q.announce(n.Name, n.ID, n.Member)
			}
		})
	}
	return true
}

// announce handles the announcement of the release of token on name.
// When next names a waiter of this process, that waiter is woken; when it
// is "" (the node's queue was empty, or its turn was a reader's), the
// oldest waiter here is. When the one woken is a reader, every reader here
// is. Each waiter is woken once per release however many nodes announce
// it.
func (q *Queue) announce(name, token, next string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.names[name]
	if l == nil || len(l.list) == 0 {
		return
	}
	woken := l.list[0]
	if next != "" {
		woken = nil
		for _, w := range l.list {
			if w.id == next {
				woken = w
				break
			}
		}
	}
	if woken == nil {
		return // another process's waiter goes first
	}
	woken.signal(token)
	if woken.reader {
		for _, w := range l.list {
			if w.reader {
				w.signal(token)
			}
		}
	}
}

// signal wakes w for the release of token, once however many nodes
// announce it: at the first, since an announcement from another node may be
// lost. Called with q.mu held.
func (w *Waiter) signal(token string) {
	if w.woken == token {
		return
	}
	w.woken = token
	select {
	case w.wake <- token:
	default: // already woken and not yet retried
	}
}

// sync starts the sync goroutine of each node that has something to be
// told (a goroutine that runs already plans again after its pass); each
// brings its node to the waiters of now. Called with q.mu held.
func (q *Queue) sync(timeout time.Duration) {
	q.timeout = max(q.timeout, timeout)
	if q.life.Closed() {
		return
	}
	for i := range q.subs {
		if q.syncing[i] {
			continue // its loop plans again after its pass
		}
		if p := q.plan(i); !p.empty() {
			q.syncing[i] = true
			timeout := q.timeout
			q.life.Go(func() { q.syncLoop(i, p, timeout) })
		}
	}
}

// syncLoop brings node i's subscription and queues to the waiters of now,
// pass after pass (the first, plan, planned by sync), until a pass finds
// nothing to change. Each node has its own, so that a silent node delays
// only its own passes. A failure only loses announcements (waiters poll);
// the client re-subscribes to what it was told when it reconnects.
func (q *Queue) syncLoop(i int, plan *plan, timeout time.Duration) {
	for {
		plan.subscribe(q.subs[i].s, timeout)
		if plan.op != nil {
			ops := make([]node.Op, len(q.nodes))
			ops[i] = plan.op
			q.refusedBy(i, q.deliver(ops, timeout))
		}
		q.mu.Lock()
		plan, timeout = q.plan(i), q.timeout
		if plan.empty() || q.life.Closed() {
			q.syncing[i] = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
	}
}

// refusedBy turns the queue off on node i when its reply says the node
// refuses the queue's commands (see Off), and tells off, once.
func (q *Queue) refusedBy(i int, replies []node.Reply) {
	if i >= len(replies) || !errors.Is(replies[i].Err, node.ErrMisconfigured) || node.AuthFailure(replies[i].Err) {
		return // a password refused refuses everything, not the queue: nothing to turn off
	}
	q.mu.Lock()
	ns := q.subs[i]
	first := !ns.refused
	ns.refused = true
	clear(ns.queued)
	q.mu.Unlock()
	if first && q.off != nil {
		q.off(i, replies[i].Err)
	}
}
