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
// only when the lock can never be acquired through m: after [Redlock.Close]
// (the error wraps [ErrClosed]), as sync.Mutex panics on misuse.
//
// Its Unlock calls [Mutex.Unlock] with a background context. sync.Locker
// has no way to return an error, so an Unlock error (the lock was lost
// before, or the nodes failed: see Mutex.Unlock) goes to onUnlockError when
// it is not nil, and is dropped otherwise.
//
// A sync.Locker cannot tell its user that the lock was lost while held:
// code that can should use [Mutex] or [Redlock.Do] directly.
func (m *Mutex) Locker(onUnlockError func(error)) sync.Locker {
	return &locker{m: m, onUnlockError: onUnlockError}
}

type locker struct {
	m             *Mutex
	onUnlockError func(error)
}

func (l *locker) Lock() {
	for {
		err := l.m.Lock(context.Background())
		if err == nil {
			return
		}
		if errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidArgument) {
			panic(err)
		}
	}
}

func (l *locker) Unlock() {
	if err := l.m.Unlock(context.Background()); err != nil && l.onUnlockError != nil {
		l.onUnlockError(err)
	}
}
