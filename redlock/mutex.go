package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Mutex is a handle on one named lock of a [Redlock]. Create it with
// [Redlock.NewMutex].
//
// A Mutex is safe for use by several goroutines, in the way a sync.Mutex
// is: it belongs to no goroutine. It holds at most one acquisition at a
// time, and each method reads and changes that state atomically. While the
// lock is held, Lock from any goroutine waits (retrying on the nodes, where
// the lock is taken) until it is released; TryLock fails. Unlock and Extend
// act on the current acquisition, whichever goroutine made it; of two
// concurrent Unlocks one releases and the other returns [ErrNotHeld].
// For independent holders, as separate processes would be, use separate
// Mutex values, each with its own acquisitions.
type Mutex struct {
	r    *Redlock
	name string
	cfg  config

	mu    sync.Mutex  // guards token and held
	token string      // this acquisition's random value; "" when not held
	held  acquisition // its validity and per-node state
}

// Name returns the lock's name, which is its key on every node.
func (m *Mutex) Name() string { return m.name }

// Lock acquires the lock, trying again after a randomised back-off (see
// [WithRetryDelay]) until it succeeds, its context ends or it has made the
// number of attempts set by [WithTries] (no bound by default). Each attempt
// is one [Mutex.TryLock].
//
// On failure it returns an error wrapping [ErrNotAcquired] and the last
// attempt's causes (one [*NodeError] per failed node); when ctx ended, the
// error also wraps ctx.Err(). A failed attempt releases what it took before
// the next one starts.
func (m *Mutex) Lock(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	for attempt := 1; ; attempt++ {
		err := m.TryLock(ctx)
		if err == nil || !errors.Is(err, ErrNotAcquired) {
			return err
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			if !errors.Is(err, ctxErr) {
				err = errors.Join(err, ctxErr)
			}
			return err
		}
		if m.cfg.tries > 0 && attempt >= m.cfg.tries {
			return err
		}
		timer := time.NewTimer(backoff(attempt, m.cfg.delayMin, m.cfg.delayMax))
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return errors.Join(err, ctx.Err())
		}
	}
}

// backoff is the sleep after the given failed attempt: uniformly random in
// [lo, min(hi, lo×2^(attempt-1))].
func backoff(attempt int, lo, hi time.Duration) time.Duration {
	ceiling := hi
	if attempt < 32 {
		if c := lo << (attempt - 1); c > 0 && c < hi {
			ceiling = c
		}
	}
	return lo + rand.N(ceiling-lo+1)
}

// TryLock makes exactly one attempt to acquire the lock: it sends
// SET name token NX PX ttl to every node at once with a new random token and
// succeeds when a quorum granted it with validity left (see [Mutex.Until]).
// It returns once the outcome is certain, which is when the quorum-th
// fastest node answers, not the slowest; a node that has not answered by the
// node timeout counts as failed.
//
// On failure it returns an error wrapping [ErrNotAcquired], one [*NodeError]
// per failed node, and ctx's error if ctx ended. Before returning it
// releases the lock on every node that answered and may hold its token;
// nodes that had not answered are released in the background as soon as
// they do. If ctx has already ended, TryLock makes no attempt.
func (m *Mutex) TryLock(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	if err := ctx.Err(); err != nil {
		return errors.Join(fmt.Errorf("%w: context done before the attempt", ErrNotAcquired), err)
	}
	id, err := uuid.NewRandom() // crypto/rand: tokens must not be guessable or repeat
	if err != nil {
		return errors.Join(fmt.Errorf("%w: token", ErrNotAcquired), err)
	}
	token := id.String()
	a, err := m.r.acquire(ctx, m.name, token, &m.cfg)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.token, m.held = token, a
	m.mu.Unlock()
	return nil
}

// Unlock releases the lock: on every node at once, a script deletes the key
// if it still holds this acquisition's token, so a holder whose lock expired
// and was taken by someone else cannot free the new holder's lock.
//
// The mutex stops holding the lock when Unlock starts, whatever the outcome.
// It returns nil when a quorum of nodes still held the token, which means no
// one else held the lock up to the release. Otherwise it returns an error
// wrapping [ErrNotHeld] and one [*NodeError] per failed node; nodes that
// kept the token then free it when its TTL passes. Unlock on a mutex that
// does not hold the lock returns ErrNotHeld without I/O. Nodes that have not
// answered when the outcome is certain are released in the background, even
// if ctx ends.
func (m *Mutex) Unlock(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	m.mu.Lock()
	token, a := m.token, m.held
	m.token, m.held = "", acquisition{}
	m.mu.Unlock()
	if token == "" {
		return fmt.Errorf("%w: not locked", ErrNotHeld)
	}
	return m.r.release(ctx, m.name, token, a, &m.cfg)
}

// Extend re-arms the lock's full TTL on every node that still holds this
// acquisition's token and, when a quorum did, moves the end of the validity
// window to the extension's start + TTL - drift. It never re-creates a key
// that expired or was taken, and it makes no attempt once the current
// validity has run out, since another holder may exist by then.
//
// On failure it returns an error wrapping [ErrNotHeld], one [*NodeError] per
// failed node, and ctx's error if ctx ended; the validity window is then
// left as it was (the lock may still be held until [Mutex.Until]).
func (m *Mutex) Extend(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	m.mu.Lock()
	token, a := m.token, m.held
	m.mu.Unlock()
	if token == "" {
		return fmt.Errorf("%w: not locked", ErrNotHeld)
	}
	start := m.r.now()
	if !start.Before(a.until) {
		return fmt.Errorf("%w: validity ran out %v ago", ErrNotHeld, start.Sub(a.until))
	}
	if err := m.r.extend(ctx, m.name, token, a, &m.cfg); err != nil {
		return err
	}
	next := validUntil(start, m.cfg.ttl, m.cfg.driftFactor)
	if !m.r.now().Before(next) {
		return fmt.Errorf("%w: extended, but no validity left of ttl %v", ErrNotHeld, m.cfg.ttl)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.token != token {
		return fmt.Errorf("%w: unlocked during extend", ErrNotHeld)
	}
	m.held.until = next
	return nil
}

// Until returns the end of the current acquisition's validity window: until
// then, no other holder can have a quorum (under the assumptions stated in
// the package documentation). It is the zero Time when the mutex does not
// hold the lock. A Time in the past means the validity ran out: the lock may
// be held by someone else now. The Time carries a monotonic clock reading;
// compare it with time.Now or time.Until in this process.
func (m *Mutex) Until() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held.until
}
