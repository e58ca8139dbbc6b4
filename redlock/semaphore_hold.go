package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A Semaphore's permit: giving it back, extending it, and what it says of
// itself.

// errReleased is the error of a permit that Release ended.
var errReleased = fmt.Errorf("%w: released", ErrNotHeld)

// Release gives the permit back: on every node at once, a script drops
// this acquisition's token from the semaphore, so a holder whose permit
// expired cannot free another's. A release that frees a permit announces
// it to waiters on the node (see [Semaphore.Acquire]).
//
// The semaphore stops holding the permit when Release starts, whatever the
// outcome; [Semaphore.Done] closes. It returns nil when a quorum of nodes
// (see [Semaphore.Quorum]) still held the token; a node that answers,
// while the validity lasts, that the token is already gone counts as
// holding it if the same Redis server answered, as for [Mutex.Unlock] (an
// earlier try of this release, resent by the client, dropped it).
// Otherwise it returns an error wrapping [ErrNotHeld] and one [*NodeError]
// per failed node; nodes that kept the token free it when its TTL passes.
// Release on a semaphore that holds no permit returns ErrNotHeld without
// I/O. Nodes that have not answered when the outcome is certain are
// released in the background, even if ctx ends, and a release that cannot
// be delivered is owed to its node (see [Redlock.Health]).
func (s *Semaphore) Release(ctx context.Context) error {
	return s.observe(ctx, s.kind.kinds()[2], s.release)
}

// release is Release, as an observed call of no attempts.
func (s *Semaphore) release(ctx context.Context) (int, error) {
	if ctx == nil {
		return 0, invalid("nil context")
	}
	s.mu.Lock()
	l := s.lease
	if l == nil {
		s.mu.Unlock()
		return 0, fmt.Errorf("%w: no permit held", ErrNotHeld)
	}
	s.lease = nil
	c := lapse{cfg: &s.cfg, report: s.report, since: l.acq.start, quorum: s.quorum}
	if l.err == nil {
		c.until = l.acq.until // a lost permit passes none: an absent token is no resend
	}
	s.mu.Unlock()
	s.end(l, errReleased)
	return 0, s.r.free(ctx, s.kind.release(s.name, l.token), s.name, true, c)
}

// Extend re-arms the permit's full TTL on every node that still holds this
// acquisition's token and, when a quorum did, moves the end of the
// validity window to the extension's start + TTL - drift. It never admits
// the token again where its permit expired or was dropped, and it makes no
// attempt once the current validity has run out.
//
// On failure it returns an error wrapping [ErrNotHeld], one [*NodeError]
// per failed node, and ctx's error if ctx ended; the validity window is
// then left as it was. When so many nodes answered that they no longer
// hold the token that no quorum can, the permit is lost for good: the
// error also wraps [ErrLockLost] and [Semaphore.Done] closes.
func (s *Semaphore) Extend(ctx context.Context) error {
	return s.observe(ctx, s.kind.kinds()[3], func(ctx context.Context) (int, error) {
		return 0, s.extend(ctx)
	})
}

// renewOnce is one extension of lease l by renewal.
func (s *Semaphore) renewOnce(holdCtx context.Context, l *lease) error {
	return s.observe(holdCtx, s.kind.kinds()[3], func(ctx context.Context) (int, error) {
		return 0, s.extendLease(ctx, l)
	})
}

// extend is Extend.
func (s *Semaphore) extend(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	s.mu.Lock()
	l := s.lease
	s.mu.Unlock()
	if l == nil {
		return fmt.Errorf("%w: no permit held", ErrNotHeld)
	}
	return s.extendLease(ctx, l)
}

// extendLease extends l, the permit held or one that ended since.
func (s *Semaphore) extendLease(ctx context.Context, l *lease) error {
	start, err := s.extendable(l)
	if err != nil {
		return err
	}
	if err := s.r.extend(ctx, s.kind.extend(s.name, l.token, s.cfg.ttl), lapse{cfg: &s.cfg, report: s.report, quorum: s.quorum}); err != nil {
		if errors.Is(err, ErrLockLost) {
			s.end(l, err)
		}
		return err
	}
	next := validUntil(start, s.cfg.ttl, s.cfg.driftFactor)
	if !s.r.now().Before(next) {
		return fmt.Errorf("%w: extended, but no validity left of ttl %v", ErrNotHeld, s.cfg.ttl)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.err != nil {
		return fmt.Errorf("%w: %w", ErrNotHeld, l.err)
	}
	l.acq.until = next
	l.loss.Reset(s.untilLoss(l))
	return nil
}

// extendable returns the start of an extension of l, or why l can no
// longer be extended.
func (s *Semaphore) extendable(l *lease) (time.Time, error) {
	s.mu.Lock()
	until, ended := l.acq.until, l.err
	s.mu.Unlock()
	if ended != nil {
		return time.Time{}, fmt.Errorf("%w: %w", ErrNotHeld, ended)
	}
	start := s.r.now()
	if !start.Before(until) {
		return time.Time{}, fmt.Errorf("%w: validity ran out %v ago", ErrNotHeld, start.Sub(until))
	}
	return start, nil
}

// Until returns the end of the current permit's validity window: until
// then, no more than the bound of holders hold a permit (permits at the
// default quorum; see [WithQuorum]). It is the zero Time when the
// semaphore holds no permit. The Time carries a monotonic clock reading;
// compare it with time.Now or time.Until in this process.
func (s *Semaphore) Until() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == nil {
		return time.Time{}
	}
	return s.lease.acq.until
}

// Done returns a channel that is closed when the current permit ends: on
// Release, when Extend finds it lost, or when its validity is about to run
// out without an extension (TTL/20 before [Semaphore.Until], so that work
// watching it can stop in time). [Semaphore.Err] then says why. When the
// semaphore holds no permit, Done returns a closed channel. Each permit has
// its own channel: call Done after Acquire.
func (s *Semaphore) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == nil {
		return closedChan
	}
	return s.lease.done
}

// Err returns nil while the current permit lasts, and once [Semaphore.Done]
// is closed the reason: an error wrapping [ErrLockLost] when the permit was
// lost, or [ErrNotHeld] when it was released or never held.
func (s *Semaphore) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == nil {
		return fmt.Errorf("%w: no permit held", ErrNotHeld)
	}
	return s.lease.err
}
