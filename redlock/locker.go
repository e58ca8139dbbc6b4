package redlock

import (
	"context"
	"errors"
	"sync"
)

// Locker returns a sync.Locker over m, for code that takes one.
//
// Its Lock calls [Mutex.Lock] with a background context: it blocks until
// the lock is acquired, whatever the nodes answer (an attempt bound set
// with [WithTries] only makes it start again), and panics after
// [Redlock.Close] (the error wraps [ErrClosed]). When misconfigured nodes
// leave no quorum (the error wraps [ErrMisconfigured]), it hands the error
// to onError and tries again after the longest retry delay, or panics with
// it when onError is nil, since nothing else could say why Lock blocks.
//
// Its Unlock calls [Mutex.Unlock] with a background context and hands its
// error to onError, or drops it when onError is nil. A sync.Locker cannot
// tell its user that the lock was lost while held: code that can should
// use [Mutex] or [Redlock.Do] directly.
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
