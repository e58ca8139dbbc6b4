package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// A Mutex's hold: releasing and extending the current acquisition, and
// what it says of itself.

// Unlock releases the lock: on every node at once, a script deletes the key
// if it still holds this acquisition's token, so a holder whose lock expired
// and was taken by someone else cannot free the new holder's lock. A release
// that frees the lock announces it to waiters on the node (see [Mutex.Lock]).
//
// The mutex stops holding the lock when Unlock starts, whatever the outcome;
// renewal stops and [Mutex.Done] closes. It returns nil when a quorum of
// nodes still held the token, which means no one else held the lock up to
// the release. A node that answers, while the validity lasts, that the key
// is already gone counts as holding it if the same Redis server answered
// (its run id, unchanged since before the lock was taken): within the
// validity only this release can have deleted it, in an earlier try the
// client resent when its reply was lost. A restart or a failover changes
// the run id: the key was lost, not released. Otherwise it returns an error wrapping [ErrNotHeld] and one
// [*NodeError] per failed node; nodes that kept the token then free it when
// its TTL passes. When nodes refused the release for a reason no retry
// changes ([ErrMisconfigured]: a missing ACL permission) and so left no
// quorum, the error wraps ErrMisconfigured instead of ErrNotHeld: the
// lock was not found lost, the release was refused. Unlock on a mutex that does not hold the lock returns
// ErrNotHeld without I/O. Nodes that have not answered when the outcome is
// certain are released in the background, even if ctx ends.
//
// With [WithReentrant], Unlock drops one hold; the mutex keeps the lock
// until the last one is dropped.
func (m *Mutex) Unlock(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	if m.cfg.observer != nil {
		return m.observe(ctx, Op{Kind: OpUnlock, Name: m.name}, m.unlock)
	}
	_, err := m.unlock(ctx)
	return err
}

// unlock is Unlock, as an observed call of no attempts.
func (m *Mutex) unlock(ctx context.Context) (int, error) {
	m.mu.Lock()
	l := m.lease
	if l == nil {
		m.mu.Unlock()
		return 0, fmt.Errorf("%w: not locked", ErrNotHeld)
	}
	op := &node.Release{Key: m.name, Also: m.also, Token: l.token, Reentrant: m.cfg.reentrant, Intent: m.intent, Writer: m.writer}
	c := lapse{cfg: &m.cfg, report: m.report}
	if m.cfg.reentrant && l.holds > 1 && l.err == nil {
		l.holds--
		m.mu.Unlock()
		return 0, m.r.release(ctx, op, c) // drops one hold
	}
	m.lease = nil
	c.since = l.acq.start
	if l.err == nil {
		c.until = l.acq.until // a lost lease passes none: an absent key is no resend
	}
	m.mu.Unlock()
	m.end(l, errUnlocked)
	op.Channel, op.Notice, op.Drop, op.QueueKey = node.ReleaseChannel(m.name), l.id, node.DropAll, node.QueueKey(m.name)
	return 0, m.r.release(ctx, op, c)
}

// errUnlocked is the error of a lease that Unlock ended.
var errUnlocked = fmt.Errorf("%w: unlocked", ErrNotHeld)

// Extend re-arms the lock's full TTL on every node that still holds this
// acquisition's token and, when a quorum did, moves the end of the validity
// window to the extension's start + TTL - drift. It never re-creates a key
// that expired or was taken, and it makes no attempt once the current
// validity has run out, since another holder may exist by then.
//
// On failure it returns an error wrapping [ErrNotHeld] ([ErrMisconfigured]
// instead when nodes that refused the extension for a reason no retry
// changes left no quorum), one [*NodeError] per failed node, and ctx's
// error if ctx ended; the validity window is then
// left as it was (the lock may still be held until [Mutex.Until]). When so
// many nodes answered that they no longer hold the token that no quorum can
// hold it any more, the lock is lost for good: the error also wraps
// [ErrLockLost] and the acquisition ends ([Mutex.Done] closes).
func (m *Mutex) Extend(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	if m.cfg.observer != nil {
		return m.observe(ctx, Op{Kind: OpExtend, Name: m.name}, m.extendHeld)
	}
	_, err := m.extendHeld(ctx)
	return err
}

// extendHeld is Extend, as an observed call of no attempts.
func (m *Mutex) extendHeld(ctx context.Context) (int, error) {
	m.mu.Lock()
	l := m.lease
	m.mu.Unlock()
	if l == nil {
		return 0, fmt.Errorf("%w: not locked", ErrNotHeld)
	}
	return 0, m.extend(ctx, l)
}

// extend extends lease l; see Extend.
func (m *Mutex) extend(ctx context.Context, l *lease) error {
	m.mu.Lock()
	a, ended := l.acq, l.err
	m.mu.Unlock()
	if ended != nil {
		return fmt.Errorf("%w: %w", ErrNotHeld, ended)
	}
	start := m.r.now()
	if !start.Before(a.until) {
		return fmt.Errorf("%w: validity ran out %v ago", ErrNotHeld, start.Sub(a.until))
	}
	op := &node.Extend{Key: m.name, Also: m.also, Token: l.token, TTL: m.cfg.ttl, Reentrant: m.cfg.reentrant, Ack: m.cfg.ack}
	if err := m.r.extend(ctx, op, lapse{cfg: &m.cfg, report: m.report}); err != nil {
		if errors.Is(err, ErrLockLost) {
			m.end(l, err)
		}
		return err
	}
	next := validUntil(start, m.cfg.ttl, m.cfg.driftFactor)
	if !m.r.now().Before(next) {
		return fmt.Errorf("%w: extended, but no validity left of ttl %v", ErrNotHeld, m.cfg.ttl)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if l.err != nil {
		return fmt.Errorf("%w: %w", ErrNotHeld, l.err)
	}
	l.acq.until = next
	l.loss.Reset(m.untilLoss(l))
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
	if m.lease == nil {
		return time.Time{}
	}
	return m.lease.acq.until
}

// Fence returns the current acquisition's fencing token (see
// [WithFencing]): greater than the token of every acquisition of this name
// that succeeded before this one began, under the conditions stated in the
// package documentation. Pass it with every write to the resource the lock
// protects, which must refuse a token lower than one it has accepted (see
// [SetFenced]). Work run by [Redlock.Do] reads it with
// MutexFrom(ctx).Fence(). It returns 0 when the mutex does not hold the
// lock (never acquired, unlocked, or lost: once [Mutex.Done] is closed) or
// the lock is not fenced; real tokens start at 1. A reentrant lock
// keeps the token of its first hold.
func (m *Mutex) Fence() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil || m.lease.err != nil {
		return 0
	}
	return m.lease.fence
}

// closedChan is the Done channel of a mutex that holds nothing.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Done returns a channel that is closed when the current acquisition ends:
// on Unlock, when renewal or Extend finds the lock lost, or when its
// validity is about to run out without an extension (TTL/20 before
// [Mutex.Until], so that work watching it can stop in time). [Mutex.Err]
// then says why. When the mutex does not hold the lock, Done returns a
// closed channel. Each acquisition has its own channel: call Done after
// Lock.
func (m *Mutex) Done() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil {
		return closedChan
	}
	return m.lease.done
}

// Err returns nil while the current acquisition lasts, and once
// [Mutex.Done] is closed the reason: an error wrapping [ErrLockLost] when the
// lock was lost, or [ErrNotHeld] when it was unlocked or never held.
func (m *Mutex) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil {
		return fmt.Errorf("%w: not locked", ErrNotHeld)
	}
	return m.lease.err
}
