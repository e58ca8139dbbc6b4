package redlock

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/internal/lease"
)

// Do runs fn while holding the lock called name: it acquires the lock as
// [Mutex.Lock] does, keeps it alive while fn runs (Do always turns on
// [WithRenewal]), and releases it when fn returns. The options are those
// [Redlock.NewMutex] takes. fn gets a context derived from ctx that is
// also cancelled when the lock is lost (see [Mutex.Done]), its cause
// ([context.Cause]) wrapping [ErrLockLost]: fn should watch it and stop
// acting on the protected resource. fn reaches the Mutex with [MutexFrom].
//
// Do returns an error wrapping [ErrNotAcquired] when it could not acquire
// the lock (fn did not run). Otherwise it returns fn's error, never
// dropped, joined with an error wrapping [ErrLockLost] if the lock was lost
// before fn returned (the work may have run unprotected; said once when
// fn's error wraps its context's cause), or with the release's error if
// Unlock failed although the lock was held throughout. If fn panics, Do
// releases the lock (waiting for the nodes at most the node timeout,
// whatever ctx says), then lets the panic go on. Do returns, or lets a
// panic go on, only once renewal has stopped.
func (r *Redlock) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...LockOption) error {
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
	return runHeld(context.WithValue(ctx, mutexKey{}, m), &m.h, m.Unlock, "do "+m.quoted(), fn)
}

// DoRead runs fn while holding a read lock of the reader-writer lock
// called name (see [RWMutex]): it takes the read lock as [RWMutex.RLock]
// does, keeps it alive while fn runs (as [WithRenewal] does, which DoRead
// always turns on), and releases it when fn returns. The options are those
// [Redlock.NewRWMutex] takes. fn's context, and what DoRead returns, are
// as for [Redlock.Do].
func (r *Redlock) DoRead(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...LockOption) error {
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
	return runHeld(ctx, &rw.rd.h, rw.RUnlock, "do read "+strconv.Quote(name), fn)
}

// runHeld runs fn with a context derived from ctx that is cancelled when
// h's hold ends, with the hold's end as its cause; then it releases the
// hold with unlock. what names the call in errors.
//
// It releases the hold however fn ends: when fn panics (or calls
// runtime.Goexit) too, and the panic then goes on, unrecovered, with its
// own value and stack, so a program that recovers it (net/http recovers a
// handler's) does not keep the lock. Either way it returns, or lets the
// panic go on, only once the hold's renewal has stopped: no renewal
// outlives the hold.
func runHeld(ctx context.Context, h *lease.Holder, unlock func(context.Context) error,
	what string, fn func(ctx context.Context) error) error {
	done, renewed := h.Done(), h.RenewalDone()
	work, cancel := context.WithCancelCause(ctx)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		select {
		case <-done:
			cancel(h.Err())
		case <-work.Done():
		}
	}()
	release := func() (lostErr, unlockErr error) {
		lostErr = h.Err() // nil unless the hold ended while fn ran
		cancel(nil)
		<-watching
		// Unlock releases whatever ctx says; with ctx done, it waits for
		// every node, at most the node timeout (see Mutex.Unlock).
		unlockErr = unlock(ctx)
		<-renewed
		return lostErr, unlockErr
	}
	returned := false
	defer func() {
		if !returned { // fn panicked or called runtime.Goexit
			_, _ = release()
		}
	}()
	fnErr := fn(work)
	returned = true

	lostErr, unlockErr := release()
	switch {
	case lostErr != nil:
		return withLoss(fnErr, lostErr, what)
	case unlockErr != nil:
		return errors.Join(fnErr, unlockErr)
	}
	return fnErr
}

// withLoss is fn's error joined with lost, the end of the hold while what
// ran. fn's error is kept whole, so that errors.Is finds all it wraps;
// when it wraps lost already (fn returned its context's cause, maybe
// inside an error of its own), the loss is said once, in fn's words.
func withLoss(fnErr, lost error, what string) error {
	said := lost.Error()
	while := strings.Replace(said, ErrLockLost.Error(), ErrLockLost.Error()+" while "+what+" ran", 1)
	if !errors.Is(fnErr, lost) {
		return errors.Join(fnErr, &wordsError{msg: while, err: lost})
	}
	return &wordsError{msg: strings.Replace(fnErr.Error(), said, while, 1), err: fnErr}
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
func (r *Redlock) DoMulti(ctx context.Context, names []string, fn func(ctx context.Context) error, opts ...LockOption) error {
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
