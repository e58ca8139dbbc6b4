package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startSentinel starts a Sentinel deployment of masters masters for one
// test and terminates it after.
func startSentinel(tb testing.TB, masters int) *Sentinels {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := StartSentinel(ctx, masters)
	require.NoError(tb, err, "start a Sentinel deployment of %d masters", masters)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(tb, s.Close(ctx))
	})
	return s
}

// startRedisCluster starts a Redis Cluster of masters nodes for one test
// and terminates it after.
func startRedisCluster(tb testing.TB, masters int) *RedisCluster {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rc, err := StartRedisCluster(ctx, masters)
	require.NoError(tb, err, "start a Redis Cluster of %d masters", masters)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(tb, rc.Close(ctx))
	})
	return rc
}

// startRedisClusters starts n Redis Clusters of masters nodes each, in
// parallel, for one test and terminates them after.
func startRedisClusters(tb testing.TB, n, masters int) []*RedisCluster {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := make([]*RedisCluster, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i], errs[i] = StartRedisCluster(ctx, masters) })
	}
	wg.Wait()
	for _, rc := range out {
		if rc != nil {
			tb.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				require.NoError(tb, rc.Close(ctx))
			})
		}
	}
	require.NoError(tb, errors.Join(errs...), "start %d Redis Clusters of %d masters", n, masters)
	return out
}

// startTLS starts n TLS nodes (in parallel) for one test and terminates
// them after.
func startTLS(tb testing.TB, n int) []*TLSNode {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := make([]*TLSNode, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i], errs[i] = StartTLS(ctx) })
	}
	wg.Wait()
	for _, tn := range out {
		if tn != nil {
			tb.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				require.NoError(tb, tn.Close(ctx))
			})
		}
	}
	require.NoError(tb, errors.Join(errs...), "start %d TLS nodes", n)
	return out
}

// closeAfter closes c after the test.
func closeAfter[C interface{ Close() error }](tb testing.TB, c C) C {
	tb.Helper()
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// timeout returns a context ending after d, cancelled after the test.
func timeout(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// TestDeployHarness checks the deployment harness itself, with go-redis
// alone: a forced Sentinel failover moves the master and keeps replicated
// keys, the Redis Cluster serves every slot, the TLS node answers only
// clients that trust its CA, and an ACL user gets exactly its rights. It
// logs the error replies the lock meets in these deployments.
func TestDeployHarness(t *testing.T) {
	t.Parallel()
	t.Run("sentinel", func(t *testing.T) {
		t.Parallel()
		s := startSentinel(t, 1)
		ctx := timeout(t, time.Minute)
		old, err := s.MasterAddr(ctx, 0)
		require.NoError(t, err)
		assert.Equal(t, s.ServerAddrs(0)[0], old, "the first master is master")

		c := closeAfter(t, s.Clients(nil)[0])
		require.NoError(t, c.Set(ctx, "harness:k", "v", 0).Err())
		start := time.Now()
		switched := make(chan time.Duration, 1)
		go func() { // when the Sentinels name the new master
			defer close(switched)
			for ctx.Err() == nil {
				if a, err := s.MasterAddr(ctx, 0); err == nil && a != old {
					switched <- time.Since(start)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		require.NoError(t, s.Failover(ctx, 0))
		t.Logf("forced failover: the Sentinels switched after %v; the old master was a connected replica after %v",
			<-switched, time.Since(start))
		now, err := s.MasterAddr(ctx, 0)
		require.NoError(t, err)
		assert.Equal(t, s.ServerAddrs(0)[1], now, "the replica was promoted")
		require.NoError(t, isMaster(ctx, now))
		require.NoError(t, replicaOf(ctx, old, now))
		v, err := c.Get(ctx, "harness:k").Result()
		require.NoError(t, err, "the failover client reads from the new master")
		assert.Equal(t, "v", v)
		require.NoError(t, c.Set(ctx, "harness:k", "w", 0).Err(), "the failover client writes to the new master")
		direct := closeAfter(t, adminClient(now, nil))
		assert.Equal(t, "w", direct.Get(ctx, "harness:k").Val())
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		rc := startRedisCluster(t, 3)
		ctx := timeout(t, 30*time.Second)
		c := closeAfter(t, rc.Client(nil))
		for i := range 50 {
			k := fmt.Sprintf("harness:%d", i)
			require.NoError(t, c.Set(ctx, k, i, time.Minute).Err())
			assert.Equal(t, fmt.Sprint(i), c.Get(ctx, k).Val())
		}
		seeded := closeAfter(t, rc.ClientSeeded(nil, rc.Addrs()[1]))
		assert.Equal(t, "7", seeded.Get(ctx, "harness:7").Val(), "a client seeded with one node finds the others")
		shards, err := c.ClusterShards(ctx).Result()
		require.NoError(t, err)
		assert.Len(t, shards, 3)

		// What a script whose keys span slots gets (the lock's scripts
		// must hash-tag their extra keys on a cluster).
		err = c.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"job:7", "job:7:redlock:fence"}).Err()
		require.Error(t, err)
		t.Logf("script over two slots: %v", err)
		assert.True(t, redis.HasErrorPrefix(err, "CROSSSLOT"), "got %v", err)
	})
	t.Run("tls", func(t *testing.T) {
		t.Parallel()
		tn := startTLS(t, 1)[0]
		ctx := timeout(t, 30*time.Second)
		c := closeAfter(t, redis.NewClient(&redis.Options{Addr: tn.Addr(), TLSConfig: tn.ClientTLS()}))
		require.NoError(t, c.Ping(ctx).Err())

		untrusted := closeAfter(t, redis.NewClient(&redis.Options{Addr: tn.Addr(), TLSConfig: tn.UntrustedTLS()}))
		err := untrusted.Ping(ctx).Err()
		require.Error(t, err)
		t.Logf("client without the CA: %v", err)
		assert.Contains(t, err.Error(), "certificate")

		plain := closeAfter(t, redis.NewClient(&redis.Options{Addr: tn.Addr(), MaxRetries: -1, ReadTimeout: time.Second}))
		err = plain.Ping(ctx).Err()
		require.Error(t, err, "the node speaks only TLS")
		t.Logf("client without TLS: %v", err)
	})
	t.Run("acl", func(t *testing.T) {
		t.Parallel()
		c := startCluster(t, 1)
		ctx := timeout(t, 30*time.Second)
		admin := inspector(t, c)[0]
		require.NoError(t, admin.Do(ctx, leastPrivilegeACL("locker", "pw", "locks:")...).Err())
		u := closeAfter(t, redis.NewClient(&redis.Options{Addr: c.Addr(0), Username: "locker", Password: "pw", MaxRetries: -1}))
		require.NoError(t, u.Ping(ctx).Err())
		require.NoError(t, u.Set(ctx, "locks:a", "t", time.Minute).Err())
		require.NoError(t, u.Set(ctx, "{locks:a}:redlock:fence", "1", time.Minute).Err())

		err := u.Set(ctx, "other:a", "t", time.Minute).Err()
		require.Error(t, err)
		t.Logf("SET on a key outside the user's patterns: %v", err)
		assert.True(t, redis.HasErrorPrefix(err, "NOPERM"), "got %v", err)

		err = u.Eval(ctx, "return redis.call('SET', KEYS[1], 'x')", []string{"other:a"}).Err()
		require.Error(t, err)
		t.Logf("script on a key outside the user's patterns: %v", err)
		assert.Contains(t, err.Error(), "NOPERM")

		err = u.Eval(ctx, "return redis.call('GET', 'other:a')", []string{"locks:a"}).Err()
		require.Error(t, err)
		t.Logf("script reading an undeclared key outside the user's patterns: %v", err)

		err = u.Eval(ctx, "return redis.call('LPUSH', KEYS[1], 'x')", []string{"locks:l"}).Err()
		require.Error(t, err)
		t.Logf("script calling a command the user lacks: %v", err)

		err = u.Publish(ctx, "elsewhere", "x").Err()
		require.Error(t, err)
		t.Logf("PUBLISH on a channel outside the user's patterns: %v", err)
		require.NoError(t, u.Publish(ctx, "redlock:x", "x").Err())

		require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all").Err())
		app := closeAfter(t, redis.NewClient(&redis.Options{Addr: c.Addr(0), Username: "app", Password: "pw", MaxRetries: -1}))
		err = app.Eval(ctx, "redis.call('SET', KEYS[1], 'x'); return redis.call('PUBLISH', 'redlock:released:x', 'y')", []string{"locks:b"}).Err()
		require.Error(t, err, "Redis 7 gives a new user no channels")
		t.Logf("PUBLISH inside a script, user without channels: %v", err)
		assert.Equal(t, "x", app.Get(ctx, "locks:b").Val(), "the script's SET before the refused PUBLISH stays applied")

		require.NoError(t, admin.RPush(ctx, "locks:list", "x").Err())
		err = admin.Do(ctx, "SET", "locks:list", "t", "NX", "GET", "PX", 1000).Err()
		require.Error(t, err)
		t.Logf("SET NX GET on a list: %v", err)
		assert.True(t, redis.HasErrorPrefix(err, "WRONGTYPE"), "got %v", err)
		n, err := admin.Exists(ctx, "locks:list").Result()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
		assert.Equal(t, "list", admin.Type(ctx, "locks:list").Val(), "SET NX GET left the list alone")
	})
}

// leastPrivilegeACL returns the command (ACL SETUSER ...) that creates the
// least-privileged user the lock can run as: keys under prefix (and their
// hash-tagged form "{prefix..."), the lock's channels "redlock:*", and the
// commands the lock sends. It is a first draft, kept in this one place.
func leastPrivilegeACL(user, pass, prefix string) []any {
	args := []any{"ACL", "SETUSER", user, "on", ">" + pass,
		"resetkeys", "~" + prefix + "*", "~{" + prefix + "*",
		"resetchannels", "&redlock:*",
		"-@all", "+@connection"}
	for _, cmd := range strings.Fields("ping info time set get del pexpire pttl type hset hincrby hexists " +
		"zadd zrem zpopmin evalsha eval script|load publish subscribe unsubscribe pubsub|numsub") {
		args = append(args, "+"+cmd)
	}
	return args
}
