package waitq

import (
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// The courtesy (a rule of the turn, internal/turn): a process whose
// release of a name reached waiters lets them go first at its next Lock of
// that name. A release reached waiters when a node named one of them, when
// more clients than this process heard it on a node (or one did, and this
// process is not subscribed there), or when this process has a waiter on
// the name. Such a release also waits, once it has its quorum, for the
// nodes that answer about as fast as the quorum did (up to as long again):
// the lock is then free everywhere when Unlock returns, and the waiter
// that takes it next does not find it still held on a node a few
// microseconds behind. With no one waiting, Unlock returns at the quorum.
//
// The next Lock's wait is a few times what the release took, at least
// courtesyMin and at most courtesyMax: enough for a woken waiter to make
// its attempt (with notification on, the Lock queues behind the waiters
// instead, and waits for its turn).
const (
	courtesyTimes = 4 // the release's time, this many times over
	courtesyMin   = time.Millisecond
	courtesyMax   = 20 * time.Millisecond
)

// maxReleased bounds the names whose last release is kept: past that,
// those older than a minute are forgotten (names seldom locked again).
const maxReleased = 1024

// released is a release that reached waiters.
type released struct {
	at   time.Time // when it returned
	took time.Duration
}

// Release watches one announced release of a name, node by node, for
// whether it reached waiters: Watch is its start, Heard its round's hook,
// Done its end. A zero Release is ready for Watch (it lives in the
// release's rule: no allocation of its own).
type Release struct {
	q     *Queue
	name  string
	heard atomic.Bool
}

// Watch starts watching a release of name by q's process.
func (r *Release) Watch(q *Queue, name string) { r.q, r.name = q, name }

// Heard reads node i's reply to the release: whether a waiter was named
// there, or another process's waiters heard it.
func (r *Release) Heard(i int, rep node.Reply) {
	rel := node.ReleasedOf(rep)
	if rel.Named || rel.Heard > 1 || rel.Heard == 1 && !r.q.Listening(i, r.name) {
		r.heard.Store(true)
	}
}

// Done ends the release, which took took and returns at now. When it
// reached waiters it records the courtesy, and reports true: the release
// then waits for the nodes about as fast as its quorum.
func (r *Release) Done(took time.Duration, now time.Time) bool {
	if !r.heard.Load() && !r.q.Waiting(r.name) {
		return false
	}
	q := r.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.released == nil {
		q.released = map[string]released{}
	}
	if len(q.released) >= maxReleased {
		for k, rel := range q.released {
			if now.Sub(rel.at) > time.Minute {
				delete(q.released, k)
			}
		}
	}
	q.released[r.name] = released{at: now, took: took}
	return true
}

// Courtesy is how long a Lock on name, at now, should still let the
// waiters that heard this process's last release of it go first; 0 or
// less when it need not (the courtesy is then over).
func (q *Queue) Courtesy(name string, now time.Time) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	rel, ok := q.released[name]
	if !ok {
		return 0
	}
	left := rel.at.Add(min(max(courtesyTimes*rel.took, courtesyMin), courtesyMax)).Sub(now)
	if left <= 0 {
		delete(q.released, name)
	}
	return left
}
