package waitq

import (
	"time"

	"github.com/google/uuid"

	"github.com/redlock-go/redlock/internal/node"
)

// Handing the lock over. A waiter of a plain lock may be queued as one
// that takes the lock handed over (JoinHandoff): its member carries a
// token of its own and the lock's TTL, and a release that pops it sets the
// key to that token in the same step that deletes its own, when this
// process subscribes on the server that runs the release, and then
// announces it (see taker in release.lua): an announcement of a handoff
// comes only from a node that holds the token. Each node's handoff
// reaches the waiter on Handed: the layer above counts them as votes.
//
// A token is registered once. After an attempt with it fails, Requeue
// retires it and registers a new one at the same place in the queues (the
// score is the waiter's start). A handoff of a token no waiter holds any
// more (retired, or its waiter gone) is an orphan: the key it set must be
// released, or the lock would stay held there until the TTL. Orphan is
// told of each, except the handoffs of a token that the layer above keeps
// (it won the lock with that token).

// Orphan is told that node i handed lock name over to token, which no
// waiter of this process waits with any more, for ttl; timeout bounds the
// release it calls for. It must not block.
type Orphan func(i int, name, token string, ttl, timeout time.Duration)

// JoinHandoff is Join for a waiter of a plain lock of ttl that takes the
// lock handed over.
func (q *Queue) JoinHandoff(name string, timeout, ttl time.Duration) *Waiter {
	return q.join(name, timeout, false, ttl)
}

// Handoff returns the token a handoff sets for w ("" for a waiter that
// does not take the lock handed over). It changes at each Requeue.
func (w *Waiter) Handoff() string {
	w.q.mu.Lock()
	defer w.q.mu.Unlock()
	return w.token
}

// Handed receives each node's handoff to w; nil for a waiter that does not
// take the lock handed over.
func (w *Waiter) Handed() <-chan node.Handed { return w.handed }

// renew gives w a new token and member. Called with q.mu held, or before
// w is shared.
func (w *Waiter) renew() {
	w.token = uuid.NewString()
	w.id = node.HandoffMember(w.q.self, w.ttl, w.token)
}

// retire gives up w's token: the handoffs of it not yet read are orphans.
// Called with q.mu held.
func (q *Queue) retire(w *Waiter) {
	for {
		select {
		case h := <-w.handed:
			q.orphaned(h.Node, w.name, h.Token, w.ttl)
		default:
			return
		}
	}
}

// orphaned tells Orphan, in the background of the caller's lock. Called
// with q.mu held.
func (q *Queue) orphaned(i int, name, token string, ttl time.Duration) {
	if q.orphan != nil {
		q.orphan(i, name, token, ttl, q.timeout)
	}
}

// popped notes that node i popped member from its queue: it is not there
// to remove any more. Called by node i's dispatcher.
func (q *Queue) popped(i int, member string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.subs == nil {
		return
	}
	if got := q.subs[i].queued[member]; got != nil {
		got.popped = true
	}
}

// handOver passes node i's handoff that notice n tells (of n.Name to
// n.Member, at the node's time n.At) on to its waiter, or calls it an
// orphan.
func (q *Queue) handOver(i int, n node.Notice) {
	name, member := n.Name, n.Member
	_, ttl, token, ok := node.Handoff(member)
	if !ok {
		return
	}
	h := node.Handed{Node: i, Token: token, Released: n.ID, At: q.now(), NodeTime: n.At}
	q.mu.Lock()
	defer q.mu.Unlock()
	if l := q.names[name]; l != nil {
		for _, w := range l.list {
			if w.id == member {
				select {
				case w.handed <- h:
					return
				default: // cannot happen: one handoff per node and token
				}
			}
		}
	}
	q.orphaned(i, name, token, ttl)
}
