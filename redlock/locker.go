package redlock

import (
	"context"
	"errors"
	"sync"
)

// Locker returns a sync.Locker over m, for code that takes one.
//
// Its Lock calls [Mutex.Lock] with a background context: it blocks until the
// lock is acquired, and goes on trying whatever the nodes answer (an
// attempt bound set with [WithTries] only makes it start again). It panics
// when the lock can never be acquired through m: after [Redlock.Close]
// (the error wraps [ErrClosed]), as sync.Mutex panics on misuse.
//
// When Lock fails because so many nodes are misconfigured that no quorum
// can grant the lock (the error wraps [ErrMisconfigured]: a missing ACL
// permission, a wrong password, a key of another type at the lock's name,
// an untrusted certificate), the Locker cannot return the error, and
// retrying may succeed once someone fixes the nodes. With onError set, it
// hands onError each such error and tries again after the longest retry
// delay (see [WithRetryDelay]), so that the program can log it and keep
// waiting. With onError nil, nothing would ever say why Lock blocks: it
// panics with the error instead.
//
// Its Unlock calls [Mutex.Unlock] with a background context. sync.Locker
// has no way to return an error, so an Unlock error (the lock was lost
// before, or the nodes failed: see Mutex.Unlock) goes to onError when it
// is not nil, and is dropped otherwise.
//
// A sync.Locker cannot tell its user that the lock was lost while held:
// code that can should use [Mutex] or [Redlock.Do] directly.
func (m *Mutex) Locker(onError func(error)) sync.Locker {
	return &locker{m: m, onError: onError}
}

type locker struct {
	m       *Mutex
	onError func(error)
}

func (l *locker) Lock() {
	for {
		hopeless, err := l.m.lockHopeless(context.Background())
		switch {
		case err == nil:
			return
		case errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidArgument):
			panic(err)
		case !hopeless:
			continue
		case l.onError == nil:
			panic(err)
		}
		l.onError(err)
		if !l.m.h.Engine.Sleep(l.m.h.Settings.DelayMax) {
			panic(ErrClosed)
		}
	}
}

func (l *locker) Unlock() {
	if err := l.m.Unlock(context.Background()); err != nil && l.onError != nil {
		l.onError(err)
	}
}
