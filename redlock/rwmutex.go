package redlock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// RWMutex is a handle on one named reader-writer lock of a [Redlock]: any
// number of readers hold it at once, or one writer alone, each on a
// majority of the nodes. Create it with [Redlock.NewRWMutex]. A Mutex of
// the same name is a writer to it. Writers are not starved: a waiting
// writer's mark keeps new readers out, so it waits at most as long as the
// readers that were in when it began to wait still hold (until they
// release, for readers that renew); a refused TryLock leaves the mark for
// the writer's next try (see docs/API.md, "Reader-writer lock").
//
// An RWMutex value is one holder: it holds the write lock, a read lock, or
// nothing. Lock and TryLock fail at once, without I/O, while it holds a
// read lock (never upgraded: RUnlock first), and RLock and TryRLock while
// it holds the write lock or a read lock already. For several readers in
// one process, use several values. Extend, Until, Done and Err act on the
// lock it took last. Like a Mutex, it is safe for use by several
// goroutines.
type RWMutex struct {
	w  Mutex     // the write lock
	wl writeLock // its kind
	rd shared    // the read lock: shared holds, on a majority

	mu      sync.Mutex // guards reading
	reading bool       // the lock taken last is the read lock
}

// Name returns the lock's name, which is its key on every node.
func (rw *RWMutex) Name() string { return rw.w.h.Name }

// Lock takes the write lock as [Mutex.Lock] takes a lock, waiting while
// readers or another writer hold it (see [RWMutex] for the readers'
// rule). It fails at once, without I/O, while this RWMutex holds a read
// lock.
func (rw *RWMutex) Lock(ctx context.Context) error {
	return rw.write(func() error {
		err := rw.w.Lock(ctx)
		if errors.Is(err, ErrNotAcquired) && !rw.w.h.Holding() {
			rw.wl.giveUp(&rw.w.h) // it waits no more (see RWMutex)
		}
		return err
	})
}

// TryLock makes one attempt to take the write lock, as [Mutex.TryLock]
// does. A refused attempt still marks the writer waiting where readers
// hold the lock. It fails at once, without I/O, while this RWMutex holds a
// read lock.
func (rw *RWMutex) TryLock(ctx context.Context) error {
	return rw.write(func() error { return rw.w.TryLock(ctx) })
}

// Unlock releases the write lock, as [Mutex.Unlock] does.
func (rw *RWMutex) Unlock(ctx context.Context) error { return rw.w.Unlock(ctx) }

// RLock takes a read lock, trying again until it succeeds, its context
// ends or it has made the number of attempts set by [WithTries], waiting
// between attempts as [Mutex.Lock] does (a writer's release, or the last
// reader's, is announced). It waits while a writer holds the lock or waits
// for it. On failure it returns an error wrapping [ErrNotAcquired] ([ErrHeld]
// when the nodes a writer holds, or waits on, leave no quorum). It fails
// at once, without I/O, with [ErrHeld] while this RWMutex holds the write
// lock.
func (rw *RWMutex) RLock(ctx context.Context) error {
	return rw.read(func() error { return rw.rd.wait(ctx) })
}

// TryRLock makes one attempt to take a read lock: every node at once is
// asked to admit a new random token as a reader, and it succeeds when a
// majority did with validity left (see [RWMutex.Until]), as
// [Mutex.TryLock] does; it undoes a failed attempt the same way. It fails
// at once, without I/O, while this RWMutex holds the write lock.
func (rw *RWMutex) TryRLock(ctx context.Context) error {
	return rw.read(func() error { return rw.rd.tryOnce(ctx) })
}

// RUnlock releases the read lock: on every node, a script drops this
// acquisition's token from the readers; the last reader's release frees
// the lock and announces it to waiters. Its outcomes are
// [Mutex.Unlock]'s: nil means no writer (nor a Mutex) held the name
// beside this reader up to the release, as far as the nodes can tell; a
// node where a writer holds the name counts as not holding the read lock.
func (rw *RWMutex) RUnlock(ctx context.Context) error { return rw.rd.release(ctx) }

// errReadHeld and errWriteHeld are the failures of an acquisition that the
// RWMutex's own state refused, without I/O: held, by this value (ErrHeld).
var (
	errReadHeld  = &wordsError{"redlock: lock not acquired: this RWMutex holds a read lock (a read lock is not upgraded: RUnlock it first)", ErrHeld}
	errWriteHeld = &wordsError{"redlock: lock not acquired: this RWMutex holds the write lock", ErrHeld}
	errReadAgain = &wordsError{"redlock: lock not acquired: this RWMutex already holds a read lock (one value is one reader)", ErrHeld}
)

// write takes the write lock with take, unless a read lock is held.
func (rw *RWMutex) write(take func() error) error {
	if rw.holdsRead() {
		return errReadHeld
	}
	return rw.took(false, take())
}

// read takes a read lock with take, unless a lock is held.
func (rw *RWMutex) read(take func() error) error {
	if rw.holdsWrite() {
		return errWriteHeld
	}
	if rw.holdsRead() {
		return errReadAgain
	}
	return rw.took(true, take())
}

// took notes which lock was taken last when err is nil, and returns err.
func (rw *RWMutex) took(reading bool, err error) error {
	if err == nil {
		rw.mu.Lock()
		rw.reading = reading
		rw.mu.Unlock()
	}
	return err
}

func (rw *RWMutex) holdsRead() bool { return rw.rd.h.Holding() }

func (rw *RWMutex) holdsWrite() bool { return rw.w.h.Holding() }

// last reports whether the lock taken last is the read lock.
func (rw *RWMutex) last() bool {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.reading
}

// Extend extends the lock taken last, as [Mutex.Extend] does; a read lock
// is extended even while a writer waits.
func (rw *RWMutex) Extend(ctx context.Context) error {
	if rw.last() {
		return rw.rd.extend(ctx)
	}
	return rw.w.Extend(ctx)
}

// Until returns the end of the validity window of the lock taken last (see
// [Mutex.Until]); the zero Time when it is not held.
func (rw *RWMutex) Until() time.Time {
	if rw.last() {
		return rw.rd.h.Until()
	}
	return rw.w.Until()
}

// Done returns a channel that is closed when the lock taken last ends, as
// [Mutex.Done] does; a closed channel when none was taken.
func (rw *RWMutex) Done() <-chan struct{} {
	if rw.last() {
		return rw.rd.h.Done()
	}
	return rw.w.Done()
}

// Err returns nil while the lock taken last lasts and, once
// [RWMutex.Done] is closed, why it ended (see [Mutex.Err]).
func (rw *RWMutex) Err() error {
	if rw.last() {
		return rw.rd.h.Err()
	}
	return rw.w.Err()
}

// Fence returns the write lock's fencing token (see [WithFencing]): greater
// than the token of every earlier write acquisition of this name. It is 0
// while no write lock is held, and for a lock not fenced.
func (rw *RWMutex) Fence() uint64 {
	if rw.last() {
		return 0
	}
	return rw.w.Fence()
}
