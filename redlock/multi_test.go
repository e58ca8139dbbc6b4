package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

func TestMultiMutexBadInput(t *testing.T) {
	r, _ := newFakeRedlock(t, 3)
	for _, c := range []struct {
		names []string
		opts  []LockOption
		want  string
	}{
		{nil, nil, "no lock names"},
		{[]string{"a", ""}, nil, "empty lock name at index 1"},
		{[]string{"a", "b", "a"}, nil, `"a" given twice`},
		{[]string{"a", "b"}, []LockOption{WithReentrant()}, "cannot be reentrant"},
		{[]string{"a", "b"}, []LockOption{WithFencing()}, "not fenced"},
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
	servers, clients := goredistest.Miniredis(t, 3)
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
	// TryLock returns at the quorum: the last node's grant follows, and a
	// multi-name attempt (another lane) could be granted there first.
	require.Eventually(t, func() bool {
		for _, s := range servers {
			if !s.Exists("b") {
				return false
			}
		}
		return true
	}, time.Second, time.Millisecond)
	require.ErrorIs(t, abc.TryLock(ctx), ErrNotAcquired, "b is held by a plain lock")
	for _, s := range servers {
		assert.False(t, s.Exists("a") || s.Exists("c"), "no node keeps part of the lock")
	}
	require.NoError(t, cd.TryLock(ctx), "no name in common with the plain lock")
	require.NoError(t, plainB.Unlock(ctx))
	require.ErrorIs(t, abc.TryLock(ctx), ErrNotAcquired, "c is held by the other multi-name lock")
	require.NoError(t, cd.Unlock(ctx))
	// TryLock and Unlock return at the quorum: the last node follows.
	everyNode := func(check func(get func(string) string) bool) bool {
		for _, s := range servers {
			if !check(func(k string) string { v, _ := s.Get(k); return v }) {
				return false
			}
		}
		return true
	}
	// A node still releasing the other lock would refuse this one.
	require.Eventually(t, func() bool {
		return everyNode(func(get func(string) string) bool { return get("b")+get("c")+get("d") == "" })
	}, time.Second, time.Millisecond, "the other locks are released on every node")

	require.NoError(t, abc.TryLock(ctx))
	token := tokenOf(abc)
	// A quorum holds every name; a node asked too late (its lane still
	// busy at the node timeout, on a loaded machine) holds none of them.
	assert.Eventually(t, func() bool { return holdAllOrNone(servers, token, "a", "b", "c") >= 2 },
		time.Second, time.Millisecond, "a quorum holds every name, the other nodes none")
	require.ErrorIs(t, plainB.TryLock(ctx), ErrNotAcquired, "a plain lock on one of the names is refused")
	require.NoError(t, abc.Extend(ctx))
	st, err := r.Inspect(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, tokenOf(abc), st.Holder, "Inspect of any one name")
	require.NoError(t, abc.Unlock(ctx))
	assert.Eventually(t, func() bool {
		return everyNode(func(get func(string) string) bool { return get("a")+get("b")+get("c") == "" })
	}, time.Second, time.Millisecond, "all released")

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
		held := 0
		for _, s := range servers {
			if s.Exists("x") && s.Exists("y") {
				held++
			}
		}
		assert.GreaterOrEqual(t, held, 2, "both names on a quorum")
		return nil
	}))
	assert.True(t, ran)
	boom := errors.New("boom")
	assert.ErrorIs(t, r.DoMulti(ctx, []string{"x", "y"}, func(context.Context) error { return boom }), boom)
}

// holdAllOrNone returns how many of servers hold every one of names with
// token, or -1 when one holds some of them only. A node's names are read
// one at a time: a grant landing between two reads reads as some only,
// for a caller that asks again.
func holdAllOrNone(servers []*miniredis.Miniredis, token string, names ...string) int {
	all := 0
	for _, s := range servers {
		held := 0
		for _, k := range names {
			if v, _ := s.Get(k); v == token {
				held++
			}
		}
		switch held {
		case len(names):
			all++
		case 0:
		default:
			return -1
		}
	}
	return all
}
