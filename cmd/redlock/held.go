package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redlock-go/redlock/redlock"
)

// held is what run holds while the command runs: a Mutex's lock, or with
// --permits one of a Semaphore's permits. Both are kept alive until give
// (the lock by the library's renewal, the permit by renewPermit), and both
// signal their loss through Done. Extend, Done, Err and Until are the
// library's own; Quorum is how many nodes must grant it.
type held interface {
	Extend(ctx context.Context) error
	Done() <-chan struct{}
	Err() error
	Until() time.Time
	Quorum() int
	// take acquires, waiting at most wait (0: one attempt); the renewal
	// lasts until give or the end of hold.
	take(hold context.Context, wait time.Duration) error
	// give stops the renewal and releases.
	give(ctx context.Context) error
	// what names it in messages: `lock "NAME"`, `a permit of semaphore "NAME"`.
	what() string
	// busy says why an attempt failed when no node did.
	busy() string
	// env is what the command's environment gets beside REDLOCK_NAME.
	env() []string
}

// lock is a Mutex's lock, renewed by the library (WithRenewal).
type lock struct {
	*redlock.Mutex
	fencing bool
	quorum  int
}

func (l *lock) take(hold context.Context, wait time.Duration) error {
	return l.LockWithin(hold, wait)
}
func (l *lock) give(ctx context.Context) error { return l.Unlock(ctx) }
func (l *lock) Quorum() int                    { return l.quorum }
func (l *lock) what() string                   { return fmt.Sprintf("lock %q", l.Name()) }
func (l *lock) busy() string                   { return "held elsewhere" }

func (l *lock) env() []string {
	if !l.fencing {
		return nil
	}
	return []string{"REDLOCK_FENCE=" + strconv.FormatUint(l.Fence(), 10)}
}

// shared is a Semaphore's permit or, with --read, an RWMutex's read lock
// (see reader): a hold that run renews itself.
type shared interface {
	Name() string
	Quorum() int
	Extend(ctx context.Context) error
	Done() <-chan struct{}
	Err() error
	Until() time.Time
	TryAcquire(ctx context.Context) error
	Acquire(ctx context.Context) error
	Release(ctx context.Context) error
}

// reader is an RWMutex's read lock as a shared hold.
type reader struct {
	*redlock.RWMutex
	quorum int
}

func (r reader) Quorum() int                          { return r.quorum }
func (r reader) TryAcquire(ctx context.Context) error { return r.TryRLock(ctx) }
func (r reader) Acquire(ctx context.Context) error    { return r.RLock(ctx) }
func (r reader) Release(ctx context.Context) error    { return r.RUnlock(ctx) }

// permit is one permit of a Semaphore (or a read lock, permits 0), which
// has no renewal here: renewPermit extends it while it is held.
type permit struct {
	shared
	permits int // 0: a read lock
	ttl     time.Duration
	stop    context.CancelFunc // stops the renewal; nil when none runs
	renewed chan struct{}      // closed when the renewal has stopped
}

// take acquires a permit as LockWithin does a lock: one attempt for a wait
// of 0, else attempts until wait has passed; then starts its renewal.
func (p *permit) take(hold context.Context, wait time.Duration) error {
	var err error
	if wait == 0 {
		err = p.TryAcquire(hold)
	} else {
		waitCtx, cancel := context.WithTimeout(hold, wait)
		err = p.Acquire(waitCtx)
		cancel()
		if err != nil && hold.Err() == nil && waitCtx.Err() != nil {
			err = fmt.Errorf("redlock: not acquired within %v: %w", wait, err)
		}
	}
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(hold)
	p.stop, p.renewed = stop, make(chan struct{})
	go func() {
		defer close(p.renewed)
		renewPermit(ctx, p.shared, p.ttl)
	}()
	return nil
}

// give stops the renewal, waits for it, and releases the permit.
func (p *permit) give(ctx context.Context) error {
	if p.stop != nil {
		p.stop()
		<-p.renewed
		p.stop = nil
	}
	return p.Release(ctx)
}

func (p *permit) what() string {
	if p.permits == 0 {
		return fmt.Sprintf("a read lock of %q", p.Name())
	}
	return fmt.Sprintf("a permit of semaphore %q", p.Name())
}

func (p *permit) busy() string {
	if p.permits == 0 {
		return "a writer holds it or waits for it"
	}
	return fmt.Sprintf("all %d permits held elsewhere", p.permits)
}

func (p *permit) env() []string {
	if p.permits == 0 {
		return []string{"REDLOCK_READ=1"}
	}
	return []string{"REDLOCK_PERMITS=" + strconv.Itoa(p.permits)}
}

// renewPermit extends s's permit (or read lock) every TTL/3, as the library renews a
// lock (two more chances before the validity runs out if one fails),
// until ctx ends or the permit ends. A failed extension is tried again
// sooner, TTL/12 later. It needs no deadline of its own: when no
// extension succeeds in time, the Semaphore ends the permit itself (Done
// closes), as does an extension that finds it lost for good.
func renewPermit(ctx context.Context, s shared, ttl time.Duration) {
	every, retry := ttl/3, ttl/12
	done := s.Done()
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-timer.C:
		}
		start := time.Now()
		err := s.Extend(ctx)
		switch {
		case err == nil:
			timer.Reset(time.Until(start.Add(every)))
		case errors.Is(err, redlock.ErrLockLost):
			return // Done is closed
		default:
			timer.Reset(time.Until(start.Add(retry)))
		}
	}
}
