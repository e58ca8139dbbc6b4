package redlock

import (
	"sync"
	"time"
)

// The handoff courtesy. When an Unlock's announcement reached waiters (the
// release script says how many clients heard it), the next Lock of this
// Redlock on that name does not try at once: a holder that releases and
// locks again in a loop would otherwise always win, since its attempt
// starts before the waiters have even heard the release. With notification
// on it queues behind them and tries when its turn is announced (see
// waiting.courtesy); with it off it waits a moment, a few times what the
// release took, at least courtesyMin and at most courtesyMax: enough for a
// woken waiter to make its attempt. TryLock, a single attempt, does not
// wait.
const (
	courtesyMin = time.Millisecond
	courtesyMax = 20 * time.Millisecond
)

// courtesy holds, per lock name, until when this process's next Lock lets
// the waiters that heard its last release go first.
type courtesy struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// yield records that a release of name, which took took, reached waiters.
func (c *courtesy) yield(name string, took time.Duration, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.until == nil {
		c.until = map[string]time.Time{}
	}
	if len(c.until) >= 1024 { // names seldom locked again: forget the past ones
		for k, t := range c.until {
			if !now.Before(t) {
				delete(c.until, k)
			}
		}
	}
	c.until[name] = now.Add(min(max(4*took, courtesyMin), courtesyMax))
}

// left is how long a Lock on name should still let waiters go first; 0 or
// less when it need not.
func (c *courtesy) left(name string, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.until[name]
	if !ok {
		return 0
	}
	left := until.Sub(now)
	if left <= 0 {
		delete(c.until, name)
	}
	return left
}
