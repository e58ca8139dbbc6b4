package redlock

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/redlock-go/redlock/redlock/internal/engine"
)

// Do runs fn while holding the lock called name: it acquires the lock as
// [Mutex.Lock] does (waiting as the options say), keeps it alive while fn
// runs (as [WithRenewal] does, which Do always turns on), and releases it
// when fn returns. The options are those [Redlock.NewMutex] takes.
//
// fn gets a context derived from ctx that is also cancelled when the lock is
// lost: when renewal finds it taken or expired, or cannot extend it before
// its validity is about to run out (TTL/20 before the end, so fn has time to
// stop before another holder can exist). Its cause, [context.Cause], then
// wraps [ErrLockLost]. fn should watch that context and stop acting on the
// protected resource once it is done.
//
// fn can reach the Mutex that Do holds with [MutexFrom], to read its
// validity ([Mutex.Until]) before each step.
//
// Do returns an error wrapping [ErrNotAcquired] when it could not acquire
// the lock (fn did not run). Otherwise it returns fn's error, joined with an
// error wrapping [ErrLockLost] if the lock was lost before fn returned (the
// work may have run unprotected past that point), or with the release's
// error if Unlock failed although the lock was held throughout (the nodes
// then free the lock when its TTL passes).
func (r *Redlock) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...Option) error {
	if ctx == nil {
		return engine.Invalid("nil context")
	}
	if fn == nil {
		return engine.Invalid("nil function")
	}
	m, err := r.NewMutex(name, append(opts, WithRenewal())...)
	if err != nil {
		return err
	}
	return r.do(ctx, m, fn)
}

// do runs fn while m holds its lock, as Do describes.
func (r *Redlock) do(ctx context.Context, m *Mutex, fn func(ctx context.Context) error) error {
	if err := m.Lock(ctx); err != nil {
		return err
	}
	return runHeld(context.WithValue(ctx, mutexKey{}, m), m.Done(), m.Err, m.Unlock, "do "+m.quoted(), fn)
}

// DoRead runs fn while holding a read lock of the reader-writer lock
// called name (see [RWMutex]): it takes the read lock as [RWMutex.RLock]
// does, keeps it alive while fn runs (as [WithRenewal] does, which DoRead
// always turns on), and releases it when fn returns. The options are those
// [Redlock.NewRWMutex] takes. fn's context, and what DoRead returns, are
// as for [Redlock.Do].
func (r *Redlock) DoRead(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...Option) error {
	if ctx == nil {
		return engine.Invalid("nil context")
	}
	if fn == nil {
		return engine.Invalid("nil function")
	}
	rw, err := r.NewRWMutex(name, append(opts, WithRenewal())...)
	if err != nil {
		return err
	}
	if err := rw.RLock(ctx); err != nil {
		return err
	}
	return runHeld(ctx, rw.Done(), rw.Err, rw.RUnlock, "do read "+strconv.Quote(name), fn)
}

// runHeld runs fn with a context derived from ctx that is cancelled when
// done, the hold's, is closed, with the hold's end (lost) as its cause;
// then it releases the hold with unlock. what names the call in errors.
func runHeld(ctx context.Context, done <-chan struct{}, lost func() error, unlock func(context.Context) error,
	what string, fn func(ctx context.Context) error) error {
	work, cancel := context.WithCancelCause(ctx)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		select {
		case <-done:
			cancel(lost())
		case <-work.Done():
		}
	}()

	fnErr := fn(work)
	lostErr := lost() // nil unless the hold ended while fn ran
	cancel(nil)
	<-watching

	unlockErr := unlock(context.WithoutCancel(ctx))
	switch {
	case lostErr != nil:
		if errors.Is(fnErr, lostErr) {
			fnErr = nil // fn returned its context's cause: said once, below
		}
		msg := strings.Replace(lostErr.Error(), ErrLockLost.Error(), ErrLockLost.Error()+" while "+what+" ran", 1)
		return errors.Join(fnErr, &wordsError{msg: msg, err: lostErr})
	case unlockErr != nil:
		return errors.Join(fnErr, unlockErr)
	}
	return fnErr
}

type mutexKey struct{}

// MutexFrom returns the Mutex that [Redlock.Do] holds while it runs the
// function it was given ctx for (or a context derived from it), and nil for
// any other context. The function may read it (Until, Done, Err) but must
// not Unlock or Extend it: Do does both.
func MutexFrom(ctx context.Context) *Mutex {
	m, _ := ctx.Value(mutexKey{}).(*Mutex)
	return m
}

// DoMulti runs fn while holding every lock in names, as [Redlock.Do] does
// for one (see [Redlock.NewMultiMutex]).
func (r *Redlock) DoMulti(ctx context.Context, names []string, fn func(ctx context.Context) error, opts ...Option) error {
	if ctx == nil {
		return engine.Invalid("nil context")
	}
	if fn == nil {
		return engine.Invalid("nil function")
	}
	m, err := r.NewMultiMutex(names, append(opts, WithRenewal())...)
	if err != nil {
		return err
	}
	return r.do(ctx, m, fn)
}
