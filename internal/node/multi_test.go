package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/goredis"
	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
)

// A multi-name lock is taken on a node all at once or not at all.
func TestMultiAllOrNothing(t *testing.T) {
	servers, clients := goredistest.Miniredis(t, 1)
	s, n := servers[0], goredis.NewNode(clients[0])
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	abc := func(token string) *node.Acquire {
		return &node.Acquire{Shape: node.Multi, Key: "a", Also: []string{"b", "c"}, Token: token, TTL: time.Second}
	}

	require.NoError(t, s.Set("c", "plain"))
	s.SetTTL("c", time.Minute)
	rep := callOne(n, abc("t1"))
	require.NoError(t, rep.Err)
	assert.False(t, rep.OK, "c is held")
	assert.Equal(t, "plain", node.GrantOf(rep).Holder, "the refusal names c's holder")
	assert.False(t, s.Exists("a") || s.Exists("b"), "nothing taken when one name is held")

	s.Del("c")
	rep = callOne(n, abc("t1"))
	require.NoError(t, rep.Err)
	assert.True(t, rep.OK)
	for _, k := range []string{"a", "b", "c"} {
		v, _ := s.Get(k)
		assert.Equal(t, "t1", v, k)
		assert.Equal(t, time.Second, s.TTL(k), k)
	}
	assert.True(t, callOne(n, abc("t1")).OK, "a resent acquisition that was applied counts as granted")
	overlap := &node.Acquire{Shape: node.Multi, Key: "c", Also: []string{"d"}, Token: "t2", TTL: time.Second}
	assert.False(t, callOne(n, overlap).OK, "names in common: refused")
	assert.False(t, s.Exists("d"), "and d untouched")
	assert.False(t, callOne(n, &node.Acquire{Key: "b", Token: "t2", TTL: time.Second}).OK, "a plain lock on one of the names is refused")

	// Extend needs every name.
	ext := &node.Extend{Shape: node.Multi, Key: "a", Also: []string{"b", "c"}, Token: "t1", TTL: 5 * time.Second}
	assert.True(t, callOne(n, ext).OK)
	assert.Equal(t, 5*time.Second, s.TTL("c"))
	s.Del("b") // as a forced release of one name would
	assert.False(t, callOne(n, ext).OK, "one name gone: not extended")
	assert.Equal(t, 5*time.Second, s.TTL("a"), "and nothing changed")
	assert.False(t, s.Exists("b"), "extend never re-creates a name")

	// Release deletes what still holds the token.
	require.NoError(t, s.Set("b", "other"))
	s.SetTTL("b", time.Minute)
	rel := &node.Release{Shape: node.Multi, Key: "a", Also: []string{"b", "c"}, Token: "t1"}
	rep = callOne(n, rel)
	require.NoError(t, rep.Err)
	assert.True(t, rep.OK)
	assert.False(t, s.Exists("a") || s.Exists("c"))
	v, _ := s.Get("b")
	assert.Equal(t, "other", v, "another holder's name is left alone")
	rep = callOne(n, rel)
	assert.False(t, rep.OK, "nothing of ours is left")
	assert.False(t, node.ReleasedOf(rep).Gone, "b is held by another")
	s.Del("b")
	rep = callOne(n, &node.Release{Shape: node.Multi, Key: "a", Also: []string{"b", "c"}, Token: "t1", Channel: node.ReleaseChannel("a")})
	assert.True(t, node.ReleasedOf(rep).Gone, "a resent release finds every name gone")
}

func TestSlot(t *testing.T) {
	// CLUSTER KEYSLOT on a real server.
	for key, want := range map[string]uint16{"foo": 12182, "bar": 5061, "hello": 866, "{user1000}.following": 3443, "{user1000}.followers": 3443} {
		assert.Equal(t, want, node.Slot(key), key)
	}
	assert.True(t, node.SameSlot([]string{"{o}:a", "{o}:b", "o"}))
	assert.False(t, node.SameSlot([]string{"foo", "bar"}))
}
