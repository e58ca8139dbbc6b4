package waitq

import "time"

// The courtesy: a process whose release of a name reached waiters lets
// them go first at its next Lock of that name (the rule is the layer
// above's). The Queue keeps, per name, when that release was and what it
// took.

// maxReleased bounds the names whose last release is kept: past that,
// those older than a minute are forgotten (names seldom locked again).
const maxReleased = 1024

// released is a release that reached waiters.
type released struct {
	at   time.Time // when it returned
	took time.Duration
}

// Released records that this process's release of name, which took took
// and returned at now, reached waiters.
func (q *Queue) Released(name string, took time.Duration, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.released == nil {
		q.released = map[string]released{}
	}
	if len(q.released) >= maxReleased {
		for k, r := range q.released {
			if now.Sub(r.at) > time.Minute {
				delete(q.released, k)
			}
		}
	}
	q.released[name] = released{at: now, took: took}
}

// LastRelease returns when this process's last release of name that
// reached waiters returned and what it took; ok is false when there was
// none, or it was forgotten by Forget.
func (q *Queue) LastRelease(name string) (at time.Time, took time.Duration, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r, ok := q.released[name]
	return r.at, r.took, ok
}

// Forget forgets the last release of name: its courtesy is over.
func (q *Queue) Forget(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.released, name)
}
