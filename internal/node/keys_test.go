package node

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// On a plain node, a lock's queue and fencing counter sit beside its name,
// so that an ACL key pattern covering the name covers them; on a cluster
// node they hash to the name's slot, or do not exist.
func TestKeysShareTheNamesSlot(t *testing.T) {
	for name, want := range map[string]string{
		"orders":          "{orders}:redlock:waiters",
		"{user:7}:orders": "{user:7}:orders:redlock:waiters",
		"a{b}c":           "a{b}c:redlock:waiters",
		"a{}b":            "", // no valid tag: no key can share its slot
		"only{open":       "",
		"close}only":      "", // "{close}only}" would hash "close"
	} {
		assert.Equal(t, name+":redlock:waiters", QueueKey(name), name)
		plain, cluster := Layout{}, Layout{Sharded: true}
		assert.Equal(t, QueueKey(name), plain.Beside(name, QueueKey(name)), name)
		assert.Equal(t, want, cluster.Beside(name, QueueKey(name)), name)
		if want != "" {
			assert.Equal(t, hashSlotKey(name), hashSlotKey(want), name)
			assert.Equal(t, hashSlotKey(name), hashSlotKey(cluster.Beside(name, FenceKey(name))), name)
		}
	}
}

// hashSlotKey is the part of key Redis Cluster hashes.
func hashSlotKey(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key[open+1 : open+1+end]
		}
	}
	return key
}

// Inspect reads a name's fencing counter and permit count beside it: both
// in the name's slot on a cluster node, or neither.
func TestInspectKeys(t *testing.T) {
	keys := func(l Layout, name string) []any {
		args := (&Inspect{Key: name}).Encode(l, nil)[0].Args
		n, _ := args[2].(int)
		return args[3 : 3+n]
	}
	assert.Equal(t, []any{"jobs", "jobs:redlock:fence", "jobs:redlock:permits"}, keys(Layout{}, "jobs"))
	assert.Equal(t, []any{"jobs", "{jobs}:redlock:fence", "{jobs}:redlock:permits"}, keys(Layout{Sharded: true}, "jobs"))
	assert.Equal(t, []any{"{t}jobs", "{t}jobs:redlock:fence", "{t}jobs:redlock:permits"}, keys(Layout{Sharded: true}, "{t}jobs"))
	assert.Equal(t, []any{"a{}b"}, keys(Layout{Sharded: true}, "a{}b"))
}

// A notice reads back as it was published, in the three forms the scripts
// publish (announce.lua, hand_over in release.lua).
func TestNoticeFormats(t *testing.T) {
	at := time.UnixMilli(1700000000123)
	for _, c := range []struct {
		channel, payload string
		n                Notice
	}{
		{ReleaseChannel("k"), "tok|", Notice{ID: "tok", Name: "k"}},
		{WakeChannel("p"), "tok|p/w1|k", Notice{ID: "tok", Member: "p/w1", Name: "k"}},
		{WakeChannel("p"), "tok|p/h-10-t2#h1700000000123|k", Notice{ID: "tok", Member: "p/h-10-t2", Name: "k", Handed: true, At: at}},
		{WakeChannel("p"), "tok|p/h-10-t2#h0|k", Notice{ID: "tok", Member: "p/h-10-t2", Name: "k", Handed: true}},
	} {
		got := ParseNotice(c.channel, c.payload)
		assert.Equal(t, c.n, got, c.payload)
		if c.n.Member != "" {
			assert.Equal(t, c.payload, got.String())
		} else {
			assert.Equal(t, c.payload, Notice{ID: got.ID}.String())
		}
	}
}
