package redlock

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Waiting by notification. A waiting Lock joins the lock's queue of waiters
// on every node (a sorted set of waiter ids, scored by when each started
// waiting: ZADD NX, so a waiter queued again keeps its place). A release that frees the lock pops the oldest waiter
// from each node's queue and announces itself to that waiter's Redlock only,
// on the Redlock's own channel (announce.lua); with no one queued it
// announces itself on the lock's channel, to every waiter. A Redlock holds
// one subscription per node, opened when a Lock first waits, and one
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
//     acquisition or to the reentrant release, tells copies apart). The
//     woken attempt asks again the nodes that have not released yet.
//   - With no one queued, a release wakes only the longest-waiting Lock of
//     this process on that name.
//   - Subscribing, unsubscribing, queueing and unqueueing go through one
//     goroutine per node, which brings the node to the waiters of now,
//     however many came and went meanwhile: a silent node holds that one
//     goroutine, not one per waiter. A name's subscription lingers for
//     subLinger after its last waiter.
//   - Announcements can be lost (a node down, a subscription reconnecting,
//     a release published before the SUBSCRIBE took effect, a named waiter
//     that died): every waiter still polls on its back-off, which bounds the
//     cost of a lost announcement to one back-off.

const (
	channelPrefix = "redlock:released:"
	wakePrefix    = "redlock:wake:"
)

// releaseChannel is the pub/sub channel on which releases of name are
// announced.
func releaseChannel(name string) string { return channelPrefix + name }

// wakeChannel is where a release that names a waiter of the Redlock whose
// waiters have id self announces it, for every lock name: only the process
// whose turn it is hears it.
func wakeChannel(self string) string { return wakePrefix + self }

// waiters is a Redlock's registry of waiting Locks and its subscriptions.
type waiters struct {
	r    *Redlock
	self string // this Redlock's waiters' id: the prefix of their queue members

	mu       sync.Mutex
	subs     []*nodeSub // one per node once started; nil before
	queues   map[string]*waitQueue
	sweeping bool // the sweep goroutine runs
}

// nodeSub is one node's subscription, the channels it should have, and
// the waiters queued on the node. Guarded by waiters.mu.
type nodeSub struct {
	p       *peer
	s       subscription
	have    map[string]bool    // subscribed, as far as the node was told
	queued  map[string]*queued // waiter id → what the node was told
	syncing bool               // its goroutine runs
}

// queued is a waiter as one node's queue has it.
type queued struct {
	name string
	gen  int
}

// waitQueue is the Locks of this process waiting on one name, oldest first.
type waitQueue struct {
	list []*waiter
	idle time.Time // since when no Lock waits on the name; zero while one does
}

// subLinger is how long a name's subscription outlives its last waiter: a
// process that locks the same name again and again keeps it, instead of
// unsubscribing and subscribing around every acquisition (and missing the
// announcements sent in between).
const subLinger = 5 * time.Second

// queueTTL is how long a lock's queue of waiters outlives its last
// registration on a node.
const queueTTL = time.Minute

// queueKey is where each node keeps the queue of waiters of lock name,
// beside the name so that a key pattern of an ACL user that covers the
// name covers it too. A Redis Cluster node keeps it in the name's hash slot
// instead, since the release script uses both (see inSlot).
func queueKey(name string) string { return name + ":redlock:waiters" }

// waiter is one waiting Lock. wake receives at most one pending signal:
// the released token (or, for a reentrant lock, the release's id).
type waiter struct {
	ws      *waiters
	name    string
	id      string // its member in the nodes' queues
	since   int64  // when it started waiting, Unix ms: its place in the queues
	timeout time.Duration
	wake    chan string
	// Guarded by ws.mu:
	gen   int    // bumped when it must be queued again
	woken string // the release that last woke it
}

// join registers a waiter on name, subscribing to its channel on every node
// when it is the first. Subscribing happens in the background, each node
// bounded by timeout: a down node costs nothing but its announcements.
func (ws *waiters) join(name string, timeout time.Duration) *waiter {
	w := &waiter{ws: ws, name: name, id: ws.self + "/" + uuid.NewString(), since: time.Now().UnixMilli(), timeout: timeout,
		wake: make(chan string, 1), gen: 1}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.subs == nil && !ws.start() {
		return w // closed: nothing will wake it; it polls
	}
	q := ws.queues[name]
	if q == nil {
		q = &waitQueue{}
		ws.queues[name] = q
	}
	q.idle = time.Time{}
	q.list = append(q.list, w)
	ws.sync(timeout)
	return w
}

// requeue puts w back in the nodes' queues, at its old place: a release
// that named it popped it, and its attempt failed.
func (w *waiter) requeue() {
	ws := w.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.subs == nil {
		return
	}
	w.gen++
	ws.sync(w.timeout)
}

// leave unregisters w. When it was the last waiter on its name, the name's
// subscription lingers for subLinger, then goes.
func (w *waiter) leave() {
	ws := w.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	q := ws.queues[w.name]
	if q == nil {
		return
	}
	for i, x := range q.list {
		if x == w {
			q.list = append(q.list[:i], q.list[i+1:]...)
			break
		}
	}
	if ws.subs != nil {
		ws.sync(w.timeout) // out of the nodes' queues
	}
	if len(q.list) == 0 {
		q.idle = ws.r.now()
		if !ws.sweeping && ws.r.track(1) == nil {
			ws.sweeping = true
			go func() {
				defer ws.r.wg.Done()
				ws.sweep(w.timeout)
			}()
		}
	}
}

// sweep drops the names no Lock has waited on for subLinger, and their
// subscriptions; it returns once no name is idle, or on Close.
func (ws *waiters) sweep(timeout time.Duration) {
	for {
		ws.mu.Lock()
		now := ws.r.now()
		next := time.Duration(0)
		dropped := false
		for name, q := range ws.queues {
			if q.idle.IsZero() {
				continue
			}
			if left := q.idle.Add(subLinger).Sub(now); left > 0 {
				if next == 0 || left < next {
					next = left
				}
				continue
			}
			delete(ws.queues, name)
			dropped = true
		}
		if dropped {
			ws.sync(timeout)
		}
		if next == 0 {
			ws.sweeping = false
			ws.mu.Unlock()
			return
		}
		ws.mu.Unlock()
		if !ws.r.sleep(next) {
			ws.mu.Lock()
			ws.sweeping = false
			ws.mu.Unlock()
			return
		}
	}
}

// listening reports whether this Redlock's subscription to node i has
// name's channel: a release announced there reached it.
func (ws *waiters) listening(i int, name string) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.subs != nil && ws.subs[i].have[releaseChannel(name)]
}

// waiting reports whether a Lock of this process waits on name.
func (ws *waiters) waiting(name string) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	q := ws.queues[name]
	return q != nil && len(q.list) > 0
}

// start opens one subscription per node and their dispatchers. Called with
// ws.mu held; false when the Redlock is closed.
func (ws *waiters) start() bool {
	n := len(ws.r.peers)
	if err := ws.r.track(n); err != nil {
		return false
	}
	ws.queues = map[string]*waitQueue{}
	ws.subs = make([]*nodeSub, n)
	for i, p := range ws.r.peers {
		s := p.n.subscribe()
		ws.subs[i] = &nodeSub{p: p, s: s, have: map[string]bool{}, queued: map[string]*queued{}}
		msgs := s.messages()
		wake := wakeChannel(ws.self)
		go func() {
			defer ws.r.wg.Done()
			for m := range msgs {
				if m.Channel == wake { // "token|waiter|name"
					token, rest, _ := strings.Cut(m.Payload, "|")
					next, name, _ := strings.Cut(rest, "|")
					ws.announce(name, token, next)
					continue
				}
				token, _, _ := strings.Cut(m.Payload, "|")
				ws.announce(strings.TrimPrefix(m.Channel, channelPrefix), token, "")
			}
		}()
	}
	return true
}

// sync brings every node's subscription to the channels waited on, each
// node in its own goroutine, started unless it runs already. Called with
// ws.mu held.
func (ws *waiters) sync(timeout time.Duration) {
	for _, ns := range ws.subs {
		if ns.syncing || ws.r.track(1) != nil {
			continue
		}
		ns.syncing = true
		go func() {
			defer ws.r.wg.Done()
			ws.syncNode(ns, timeout)
		}()
	}
}

// syncNode subscribes and unsubscribes ns, and queues and unqueues the
// waiters on its node, until both are those of the Locks waiting now. A
// failure only loses announcements (waiters poll); the client re-subscribes
// to what it was told when it reconnects.
func (ws *waiters) syncNode(ns *nodeSub, timeout time.Duration) {
	for {
		ws.mu.Lock()
		var add, drop []string
		if c := wakeChannel(ws.self); !ns.have[c] {
			add = append(add, c)
		}
		for name := range ws.queues {
			if c := releaseChannel(name); !ns.have[c] {
				add = append(add, c)
			}
		}
		for c := range ns.have {
			if strings.HasPrefix(c, channelPrefix) && ws.queues[strings.TrimPrefix(c, channelPrefix)] == nil {
				drop = append(drop, c)
			}
		}
		for _, c := range add {
			ns.have[c] = true
		}
		for _, c := range drop {
			delete(ns.have, c)
		}
		var ops []*queueReq
		current := map[string]bool{}
		for name, q := range ws.queues {
			for _, w := range q.list {
				current[w.id] = true
				if got := ns.queued[w.id]; got == nil || got.gen < w.gen {
					ns.queued[w.id] = &queued{name: name, gen: w.gen}
					ops = append(ops, &queueReq{lock: name, key: queueKey(name), member: w.id, score: w.since},
						&queueReq{lock: name, key: queueKey(name), ttl: queueTTL})
				}
			}
		}
		for id, got := range ns.queued {
			if !current[id] {
				delete(ns.queued, id)
				ops = append(ops, &queueReq{lock: got.name, key: queueKey(got.name), member: id, remove: true})
			}
		}
		if len(add) == 0 && len(drop) == 0 && len(ops) == 0 {
			ns.syncing = false
			ws.mu.Unlock()
			return
		}
		ws.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		if len(add) > 0 {
			_ = ns.s.subscribe(ctx, add...)
		}
		if len(drop) > 0 {
			_ = ns.s.unsubscribe(ctx, drop...)
		}
		cancel()
		// Sent together, so they share a round trip; waited for, so that
		// one goroutine per node is all a slow node costs.
		replies := make(chan struct{}, len(ops))
		for _, o := range ops {
			ns.p.send(context.Background(), timeout, ws.r.cfg.observer, o, func(reply) { replies <- struct{}{} })
		}
		for range ops {
			<-replies
		}
	}
}

// announce handles the announcement of the release of token on name.
// When next names a waiter of this process, that waiter is woken; when it
// is "" (the node's queue was empty), the oldest waiter here is. Each
// waiter is woken once per release however many nodes announce it.
func (ws *waiters) announce(name, token, next string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	q := ws.queues[name]
	if q == nil || len(q.list) == 0 {
		return
	}
	if next != "" {
		for _, w := range q.list {
			if w.id == next {
				w.signal(token)
				return
			}
		}
		return // another process's waiter goes first
	}
	q.list[0].signal(token)
}

// signal wakes w for the release of token, once however many nodes
// announce it: at the first, since an announcement from another node may be
// lost. Nodes that have not released yet are asked again by the attempt
// (see acquire). Called with ws.mu held.
func (w *waiter) signal(token string) {
	if w.woken == token {
		return
	}
	w.woken = token
	select {
	case w.wake <- token:
	default: // already woken and not yet retried
	}
}

// close closes the subscriptions, which ends the dispatchers.
func (ws *waiters) close() {
	ws.mu.Lock()
	subs := ws.subs
	ws.mu.Unlock()
	for _, ns := range subs {
		_ = ns.s.close()
	}
}
