package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node/nodetest"
)

func TestMultiMutexBadInput(t *testing.T) {
	r, _ := newFakeRedlock(t, 3)
	for _, c := range []struct {
		names []string
		opts  []Option
		want  string
	}{
		{nil, nil, "no lock names"},
		{[]string{"a", ""}, nil, "empty lock name at index 1"},
		{[]string{"a", "b", "a"}, nil, `"a" given twice`},
		{[]string{"a", "b"}, []Option{WithReentrant()}, "cannot be reentrant"},
		{[]string{"a", "b"}, []Option{WithFencing()}, "not fenced"},
	} {
		_, err := r.NewMultiMutex(c.names, c.opts...)
		require.ErrorIs(t, err, ErrInvalidArgument, "%v", c.names)
		assert.Contains(t, err.Error(), c.want)
	}
	err := r.DoMulti(t.Context(), []string{"a", "a"}, func(context.Context) error { return nil })
	assert.ErrorIs(t, err, ErrInvalidArgument)
	m, err := r.NewMultiMutex([]string{"solo"})
	require.NoError(t, err)
	assert.Equal(t, []string{"solo"}, m.Names(), "one name: a plain Mutex")
}

// On a Redis Cluster node the names must share a slot.
func TestMultiMutexClusterSlot(t *testing.T) {
	fs := nodetest.Fakes(3)
	fs[0].Sharded = true
	r, err := newRedlock(nodetest.Nodes(fs))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
	_, err = r.NewMultiMutex([]string{"orders:7", "orders:8"})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "hash tag")
	m, err := r.NewMultiMutex([]string{"{orders}:7", "{orders}:8"})
	require.NoError(t, err)
	assert.Equal(t, []string{"{orders}:7", "{orders}:8"}, m.Names())
}

// A multi-name lock over real scripts (miniredis): all names or none,
// against plain locks and other multi-name locks on its names.
func TestMultiMutexOnMiniredis(t *testing.T) {
	servers, clients := nodetest.Miniredis(t, 3)
	r, err := New(clients, WithTTL(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
	ctx := t.Context()
	abc, err := r.NewMultiMutex([]string{"a", "b", "c"})
	require.NoError(t, err)
	plainB, err := r.NewMutex("b")
	require.NoError(t, err)
	cd, err := r.NewMultiMutex([]string{"d", "c"})
	require.NoError(t, err)

	require.NoError(t, plainB.TryLock(ctx))
	require.ErrorIs(t, abc.TryLock(ctx), ErrNotAcquired, "b is held by a plain lock")
	for _, s := range servers {
		assert.False(t, s.Exists("a") || s.Exists("c"), "no node keeps part of the lock")
	}
	require.NoError(t, cd.TryLock(ctx), "no name in common with the plain lock")
	require.NoError(t, plainB.Unlock(ctx))
	require.ErrorIs(t, abc.TryLock(ctx), ErrNotAcquired, "c is held by the other multi-name lock")
	require.NoError(t, cd.Unlock(ctx))

	require.NoError(t, abc.TryLock(ctx))
	for _, s := range servers {
		for _, k := range []string{"a", "b", "c"} {
			v, _ := s.Get(k)
			assert.Equal(t, tokenOf(abc), v, k)
		}
	}
	require.ErrorIs(t, plainB.TryLock(ctx), ErrNotAcquired, "a plain lock on one of the names is refused")
	require.NoError(t, abc.Extend(ctx))
	st, err := r.Inspect(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, tokenOf(abc), st.Holder, "Inspect of any one name")
	require.NoError(t, abc.Unlock(ctx))
	for _, s := range servers {
		assert.False(t, s.Exists("a") || s.Exists("b") || s.Exists("c"), "all released")
	}

	// A forced release of one name loses the lock at its next extension.
	require.NoError(t, abc.TryLock(ctx))
	_, err = r.ForceUnlock(ctx, "b")
	require.NoError(t, err)
	require.ErrorIs(t, abc.Extend(ctx), ErrLockLost)
	<-abc.Done()

	ran := false
	require.NoError(t, r.DoMulti(ctx, []string{"x", "y"}, func(ctx context.Context) error {
		ran = true
		m := MutexFrom(ctx)
		assert.Equal(t, []string{"x", "y"}, m.Names())
		for _, s := range servers {
			assert.True(t, s.Exists("x") && s.Exists("y"))
		}
		return nil
	}))
	assert.True(t, ran)
	boom := errors.New("boom")
	assert.ErrorIs(t, r.DoMulti(ctx, []string{"x", "y"}, func(context.Context) error { return boom }), boom)
}
