package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/report"
)

// newRW returns a Redlock on three miniredis servers (real scripts) and a
// function that waits until no node keeps name: an unlock returns at the
// quorum, and the last node follows.
func newRW(t *testing.T, opts ...Option) (*Redlock, []*miniredis.Miniredis, func(name string)) {
	t.Helper()
	servers, clients := goredistest.Miniredis(t, 3)
	r, err := New(clients, append([]Option{WithTTL(5 * time.Second), WithRetryDelay(5*time.Millisecond, 20*time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
	free := func(name string) {
		t.Helper()
		require.Eventually(t, func() bool {
			for _, s := range servers {
				if s.Exists(name) {
					return false
				}
			}
			return true
		}, time.Second, time.Millisecond, "every node frees %s", name)
	}
	return r, servers, free
}

func newRWMutex(t *testing.T, r *Redlock, name string, opts ...LockOption) *RWMutex {
	t.Helper()
	rw, err := r.NewRWMutex(name, opts...)
	require.NoError(t, err)
	return rw
}

// Readers hold together; a writer holds alone; a Mutex of the same name is
// a writer to them, and they are a holder to it.
func TestRWMutexReadersTogetherWriterAlone(t *testing.T) {
	r, _, free := newRW(t)
	ctx := t.Context()
	a, b, w := newRWMutex(t, r, "doc"), newRWMutex(t, r, "doc"), newRWMutex(t, r, "doc")
	plain, err := r.NewMutex("doc")
	require.NoError(t, err)

	require.NoError(t, a.TryRLock(ctx))
	require.NoError(t, b.TryRLock(ctx), "readers hold together")
	require.ErrorIs(t, w.TryLock(ctx), ErrNotAcquired, "no writer beside readers")
	require.ErrorIs(t, plain.TryLock(ctx), ErrNotAcquired, "no Mutex beside readers")
	require.NoError(t, a.RUnlock(ctx))
	require.ErrorIs(t, w.TryLock(ctx), ErrNotAcquired, "one reader is still in")
	require.NoError(t, b.RUnlock(ctx))
	require.Eventually(t, func() bool { return w.TryLock(ctx) == nil }, time.Second, 5*time.Millisecond, "the writer gets in once the readers left")
	require.ErrorIs(t, a.TryRLock(ctx), ErrNotAcquired, "no reader beside a writer")
	require.ErrorIs(t, plain.TryLock(ctx), ErrNotAcquired, "no Mutex beside a writer")
	require.NoError(t, w.Unlock(ctx))
	free("doc")

	require.NoError(t, plain.TryLock(ctx))
	require.ErrorIs(t, w.TryLock(ctx), ErrNotAcquired, "a Mutex is a writer")
	require.ErrorIs(t, a.TryRLock(ctx), ErrNotAcquired, "no reader beside a Mutex")
	require.NoError(t, plain.Unlock(ctx))
	free("doc")
	require.NoError(t, a.TryRLock(ctx))
	assert.Zero(t, a.Fence(), "a read lock has no fencing token")
	require.NoError(t, a.Extend(ctx))
	assert.True(t, time.Until(a.Until()) > 4*time.Second)
	require.NoError(t, a.RUnlock(ctx))
	<-a.Done()
	assert.ErrorIs(t, a.Err(), ErrNotHeld)
}

// Once a writer waits, new readers wait too; readers already in keep their
// holds (and may extend them); the writer gets the lock when they leave.
func TestRWMutexWriterPreference(t *testing.T) {
	r, servers, free := newRW(t)
	ctx := t.Context()
	in, late, w := newRWMutex(t, r, "doc"), newRWMutex(t, r, "doc"), newRWMutex(t, r, "doc")

	require.NoError(t, in.TryRLock(ctx))
	require.ErrorIs(t, w.TryLock(ctx), ErrNotAcquired)
	marked := 0
	for _, s := range servers {
		if s.Exists("doc:redlock:writer") {
			marked++
		}
	}
	require.GreaterOrEqual(t, marked, 2, "the refused writer marked itself waiting on a majority")
	require.ErrorIs(t, late.TryRLock(ctx), ErrNotAcquired, "a new reader waits behind the waiting writer")
	require.NoError(t, in.Extend(ctx), "a reader already in keeps its hold")

	locked := make(chan error, 1)
	go func() { locked <- w.Lock(ctx) }()
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, late.RLock(short), ErrNotAcquired, "still no new reader while the writer waits")
	require.NoError(t, in.RUnlock(ctx))
	select {
	case err := <-locked:
		require.NoError(t, err, "the writer gets the lock when the readers are gone")
	case <-time.After(2 * time.Second):
		t.Fatal("the waiting writer did not get the lock")
	}
	require.NoError(t, w.Unlock(ctx))
	free("doc")
	require.NoError(t, late.TryRLock(ctx), "the writer's grant took its mark away")
	require.NoError(t, late.RUnlock(ctx))
}

// An RWMutex value is one holder: it never upgrades a read lock, and it
// does not read under its own write lock.
func TestRWMutexOneHolder(t *testing.T) {
	r, _, free := newRW(t)
	ctx := t.Context()
	rw := newRWMutex(t, r, "doc")
	require.NoError(t, rw.RLock(ctx))
	require.ErrorIs(t, rw.RLock(ctx), errReadAgain, "at once, not a wait for its own read lock")
	require.ErrorIs(t, rw.TryRLock(ctx), errReadAgain)
	require.ErrorIs(t, rw.TryLock(ctx), errReadHeld)
	require.ErrorIs(t, rw.Lock(ctx), errReadHeld, "at once, not a wait for its own read lock")
	require.NoError(t, rw.RUnlock(ctx))
	free("doc")
	require.NoError(t, rw.Lock(ctx))
	require.ErrorIs(t, rw.RLock(ctx), errWriteHeld)
	require.ErrorIs(t, rw.TryRLock(ctx), errWriteHeld)
	require.NoError(t, rw.Extend(ctx))
	require.NoError(t, rw.Unlock(ctx))
	require.ErrorIs(t, rw.RUnlock(ctx), ErrNotHeld)
}

// With fencing, every write acquisition's token exceeds every earlier
// one's, readers in between or not.
func TestRWMutexFencedWrites(t *testing.T) {
	r, _, free := newRW(t, WithFencing())
	ctx := t.Context()
	w, reader := newRWMutex(t, r, "doc"), newRWMutex(t, r, "doc")
	var last uint64
	for range 3 {
		require.NoError(t, w.Lock(ctx))
		f := w.Fence()
		assert.Greater(t, f, last)
		last = f
		require.NoError(t, w.Unlock(ctx))
		free("doc")
		require.NoError(t, reader.RLock(ctx))
		assert.Zero(t, reader.Fence())
		require.NoError(t, reader.RUnlock(ctx))
		free("doc")
	}
}

// DoRead runs its function under a read lock, renewed; a writer waits.
func TestDoRead(t *testing.T) {
	r, _, free := newRW(t, WithTTL(300*time.Millisecond))
	ctx := t.Context()
	w := newRWMutex(t, r, "doc")
	ran := false
	require.NoError(t, r.DoRead(ctx, "doc", func(ctx context.Context) error {
		ran = true
		require.ErrorIs(t, w.TryLock(ctx), ErrNotAcquired, "no writer beside a reader")
		time.Sleep(500 * time.Millisecond) // past the TTL: renewed
		require.NoError(t, ctx.Err(), "the read lock is kept while the function runs")
		return nil
	}))
	require.True(t, ran)
	free("doc")
	require.NoError(t, w.TryLock(ctx))
	require.NoError(t, w.Unlock(ctx))
}

func TestRWMutexBadInput(t *testing.T) {
	r, _, _ := newRW(t)
	for name, try := range map[string]func() error{
		"empty name": func() error { _, err := r.NewRWMutex(""); return err },
		"reentrant":  func() error { _, err := r.NewRWMutex("doc", WithReentrant()); return err },
		"quorum":     func() error { _, err := r.NewRWMutex("doc", WithQuorum(2)); return err },
		"nil fn":     func() error { return r.DoRead(t.Context(), "doc", nil) },
		"nil ctx":    func() error { return newRWMutex(t, r, "doc").RLock(nil) }, //nolint:staticcheck // on purpose
	} {
		assert.ErrorIs(t, try(), ErrInvalidArgument, name)
	}
	r2, _ := newFakeRedlock(t, 3, WithReentrant())
	_, err := r2.NewRWMutex("doc")
	assert.NoError(t, err, "a reentrant default is for mutexes")
}

// A name that cannot keep the writer's mark in its Cluster slot is refused.
func TestRWMutexClusterSlot(t *testing.T) {
	r, fs := newFakeRedlock(t, 3)
	fs[0].Sharded = true
	r2, err := newRedlock(nodetest.Nodes(fs))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r2.Close(context.Background()) })
	_, err = r2.NewRWMutex("a{}b")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.ErrorContains(t, err, "hash tag")
	_, err = r2.NewRWMutex("{doc}")
	assert.NoError(t, err)
	_, err = r.NewRWMutex("a{}b")
	assert.NoError(t, err, "not a Cluster")
}

// The Observer sees reads with their own kinds, writes as a Mutex's.
func TestRWMutexObserved(t *testing.T) {
	rec := &recorder{}
	r, _, free := newRW(t, WithObserver(rec))
	ctx := t.Context()
	rw := newRWMutex(t, r, "doc")
	require.NoError(t, rw.RLock(ctx))
	require.NoError(t, rw.Extend(ctx))
	require.NoError(t, rw.RUnlock(ctx))
	free("doc")
	require.NoError(t, rw.TryRLock(ctx))
	require.NoError(t, rw.RUnlock(ctx))
	free("doc")
	require.NoError(t, rw.TryLock(ctx))
	require.NoError(t, rw.Unlock(ctx))
	calls, _, holds, _ := rec.snapshot()
	assert.Equal(t, []string{"start RLock #1", "end RLock #1", "start ExtendRead #2", "end ExtendRead #2",
		"start RUnlock #3", "hold doc", "end RUnlock #3", "start TryRLock #4", "end TryRLock #4", "start RUnlock #5", "hold doc", "end RUnlock #5",
		"start TryLock #6", "end TryLock #6", "start Unlock #7", "hold doc", "end Unlock #7"}, calls)
	assert.Len(t, holds, 3)
}

// ForceUnlock frees a name whoever holds it: the readers of an RWMutex, or
// the holders of a semaphore, who find out at their next extension.
func TestForceUnlockReadersAndPermits(t *testing.T) {
	r, servers, free := newRW(t)
	ctx := t.Context()
	a, b := newRWMutex(t, r, "doc"), newRWMutex(t, r, "doc")
	require.NoError(t, a.RLock(ctx))
	require.NoError(t, b.RLock(ctx))
	out, err := r.ForceUnlock(ctx, "doc")
	require.NoError(t, err)
	deleted := 0
	for _, fr := range out {
		require.NoError(t, fr.Err)
		if fr.Deleted {
			deleted++
			assert.Contains(t, []string{tokenOfLease(&a.rd), tokenOfLease(&b.rd)}, fr.Holder, "a reader, not the marker")
			assert.False(t, fr.Reentrant, "readers are not a reentrant lock")
		}
	}
	assert.GreaterOrEqual(t, deleted, 2)
	require.ErrorIs(t, a.Extend(ctx), ErrLockLost)
	free("doc")

	sem, err := r.NewSemaphore("jobs", 2)
	require.NoError(t, err)
	require.NoError(t, sem.Acquire(ctx))
	out, err = r.ForceUnlock(ctx, "jobs")
	require.NoError(t, err)
	for _, fr := range out {
		require.NoError(t, fr.Err, "a semaphore is forced free as a lock is")
	}
	require.ErrorIs(t, sem.Extend(ctx), ErrLockLost)
	for _, s := range servers {
		assert.False(t, s.Exists("jobs"))
	}
}

func tokenOfLease(s *shared) string { return s.h.Current().Token }

// Inspect tells readers from a writer, and lists the readers.
func TestInspectRWMutex(t *testing.T) {
	r, _, free := newRW(t)
	ctx := t.Context()
	a, b := newRWMutex(t, r, "doc"), newRWMutex(t, r, "doc")
	require.NoError(t, a.RLock(ctx))
	require.NoError(t, b.RLock(ctx))
	var st *report.LockState
	require.Eventually(t, func() bool {
		var err error
		st, err = r.Inspect(ctx, "doc")
		require.NoError(t, err)
		return st.Readers != nil && len(st.Readers.Holders) == 2 && st.Readers.Holders[1].Nodes == 3
	}, time.Second, time.Millisecond, "both readers on every node")
	assert.Equal(t, report.KindReaders, st.Kind)
	assert.Nil(t, st.Semaphore)
	assert.False(t, st.Locked())
	assert.Equal(t, 2, st.Readers.Quorum)
	assert.ElementsMatch(t, []string{tokenOfLease(&a.rd), tokenOfLease(&b.rd)}, []string{st.Readers.Holders[0].Token, st.Readers.Holders[1].Token})
	for _, n := range st.Nodes {
		assert.Equal(t, report.KindReaders, n.Kind)
		assert.Len(t, n.Permits, 2)
	}
	require.NoError(t, a.RUnlock(ctx))
	require.NoError(t, b.RUnlock(ctx))
	free("doc")
	require.NoError(t, a.Lock(ctx))
	st, err := r.Inspect(ctx, "doc")
	require.NoError(t, err)
	assert.Equal(t, report.KindLock, st.Kind, "a writer is a lock")
	assert.True(t, st.Locked())
	assert.Nil(t, st.Readers)
}

// WithRenewal keeps a permit past its TTL until Release, and stops with
// the context it was acquired with.
func TestSemaphoreRenewal(t *testing.T) {
	r, _, _ := newRW(t, WithTTL(300*time.Millisecond))
	sem, err := r.NewSemaphore("jobs", 2, WithRenewal())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	require.NoError(t, sem.Acquire(ctx))
	time.Sleep(time.Second)
	require.NoError(t, sem.Err(), "renewed past three TTLs")
	cancel()
	select {
	case <-sem.Done():
		assert.ErrorIs(t, sem.Err(), ErrLockLost, "not renewed once its context ended")
	case <-time.After(2 * time.Second):
		t.Fatal("the permit outlived its context's end by more than its TTL")
	}
	plain, err := r.NewSemaphore("other", 2)
	require.NoError(t, err)
	require.NoError(t, plain.Acquire(t.Context()))
	<-plain.Done()
	assert.ErrorIs(t, plain.Err(), ErrLockLost, "without renewal, lost at its TTL")
}
