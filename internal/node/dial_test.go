package node

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

// A client given to several nodes (several Redlocks) gets one dial hook:
// every node reads the same dials.
func TestDialHookOncePerClient(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	a, b := NewRedis(c), NewRedis(c)
	assert.Same(t, a.dials, b.dials)
	assert.Nil(t, a.master, "not Sentinel-managed")

	f := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = f.Close() })
	a, b = NewRedis(f), NewRedis(f)
	assert.Same(t, a.dials, b.dials)
	assert.NotNil(t, a.master)
	assert.Same(t, a.master, b.master)

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cc.Close() })
	assert.Nil(t, NewRedis(cc).LastDialFailure(), "a cluster's dials are not watched")
}
