package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// The lock as users deploy it: Sentinel-managed masters, a Redis Cluster as
// one node, TLS, ACL users with the least privileges, and names another
// program uses. The harness is deploy.go.

// redlockOver returns a Redlock over clients, closed after the test, its
// clients after it.
func redlockOver(tb testing.TB, clients []redis.UniversalClient, opts ...redlock.Option) *redlock.Redlock {
	tb.Helper()
	for _, c := range clients {
		closeAfter(tb, c)
	}
	rl, err := redlock.New(clients, opts...)
	require.NoError(tb, err)
	tb.Cleanup(func() { // runs before the clients' Close: cleanups run last first
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(tb, rl.Close(ctx), "background node calls did not finish")
	})
	return rl
}

// userClients returns one new client per node of c, logged in as user.
func userClients(c nodeSet, user, pass string) []redis.UniversalClient {
	return c.Clients(&redis.Options{Username: user, Password: pass})
}

// lockResult is how a Lock run in the background ended.
type lockResult struct {
	err error
	at  time.Time
}

// lockInBackground runs m.Lock(ctx) in a goroutine; the channel receives
// its result once.
func lockInBackground(ctx context.Context, m *redlock.Mutex) <-chan lockResult {
	out := make(chan lockResult, 1)
	go func() {
		err := m.Lock(ctx)
		out <- lockResult{err: err, at: time.Now()}
	}()
	return out
}

// await returns the result of a background Lock, failing the test if it
// has not come within d.
func await(t *testing.T, res <-chan lockResult, d time.Duration) lockResult {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(d):
		require.FailNow(t, "Lock did not return", "within %v", d)
		return lockResult{}
	}
}

// awaitQueued waits until a waiter for name is queued and listening on
// every node the admins reach: its entry is in the name's queue and the
// name's release channel has a subscriber. Both are sent in the
// background after its first failed attempt, so a fixed sleep may end
// before they are (on a busy machine), and a release announced then is
// missed and costs the waiter a full back-off.
func awaitQueued(t *testing.T, ctx context.Context, admins []*redis.Client, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, a := range admins {
			if a.ZCard(ctx, name+":redlock:waiters").Val() == 0 {
				return false
			}
			if a.PubSubNumSub(ctx, "redlock:released:"+name).Val()["redlock:released:"+name] == 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "a waiter for %s queued and subscribed on every node", name)
}

// requireMisconfigured checks a Lock that must fail at once, without
// waiting for its context, because no retry can change the nodes' answer.
func requireMisconfigured(t *testing.T, err error, took, within time.Duration) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, redlock.ErrMisconfigured)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "Lock waited for its context")
	assert.Less(t, took, within, "took %v: not at once", took)
}

// TestDeploySentinel runs the lock on five Sentinel-managed masters, and
// keeps it through a failover of two of them.
func TestDeploySentinel(t *testing.T) {
	t.Parallel()
	s := startSentinel(t, 5)
	ctx := timeout(t, 2*time.Minute)

	rl := redlockOver(t, s.Clients(nil)) // every failover client's Options().Addr is "FailoverClient"
	universal := make([]redis.UniversalClient, s.Len())
	for i := range universal {
		universal[i] = redis.NewUniversalClient(&redis.UniversalOptions{MasterName: s.MasterName(i), Addrs: s.SentinelAddrs()})
	}
	other := redlockOver(t, universal)

	// A forced failover takes about 11 s here, most of it the Sentinels'
	// own wait before they turn the old master into a replica (see
	// Sentinels.Failover): the TTL must outlast it.
	const name = "deploy:sentinel"
	mu := newMutex(t, rl, name, redlock.WithTTL(30*time.Second))
	require.NoError(t, mu.Lock(ctx))
	untouched, err := s.MasterAddr(ctx, 2)
	require.NoError(t, err)
	// Lock returns at the quorum: master 2's SET may still be on its way.
	admin := closeAfter(t, adminClient(untouched, nil))
	var token string
	require.Eventually(t, func() bool {
		token, err = admin.Get(ctx, name).Result()
		return err == nil
	}, 5*time.Second, 10*time.Millisecond, "the lock's key on master 2")

	failovers := make(chan error, 2)
	for _, i := range []int{0, 1} {
		go func() { failovers <- s.Failover(ctx, i) }()
	}
	require.NoError(t, <-failovers)
	require.NoError(t, <-failovers)
	for _, i := range []int{0, 1} {
		now, err := s.MasterAddr(ctx, i)
		require.NoError(t, err)
		assert.Equal(t, s.ServerAddrs(i)[1], now, "master %d was failed over", i)
		v, err := closeAfter(t, adminClient(now, nil)).Get(ctx, name).Result()
		if errors.Is(err, redis.Nil) {
			v = "<absent>"
		} else {
			require.NoError(t, err)
		}
		assert.Equal(t, token, v, "the replica promoted for master %d did not have the lock's key: replication lost it", i)
	}

	require.True(t, time.Now().Before(mu.Until()), "the failovers outlasted the lock's validity (until %v)", mu.Until())
	require.NoError(t, mu.Extend(ctx), "extend after the failover of masters 0 and 1")
	require.NoError(t, mu.Unlock(ctx))
	next := newMutex(t, other, name)
	// Lock, not TryLock: this Redlock's first commands find each master
	// through the Sentinels after two failovers, which under the -race
	// suite once took longer than the 100 ms node timeout on three nodes.
	nextCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, next.Lock(nextCtx), "another Redlock (UniversalClients with a MasterName) takes the released lock")
	require.NoError(t, next.Unlock(ctx))

	t.Run("node errors name the master", func(t *testing.T) {
		// Every master refuses writes for a while (PING and INFO still
		// answer, so the Sentinels see nothing wrong): every SET times out.
		held := newMutex(t, other, name+":errors")
		require.NoError(t, held.Lock(ctx))
		masters := make([]string, s.Len())
		for i := range masters {
			masters[i], err = s.MasterAddr(ctx, i)
			require.NoError(t, err)
			require.NoError(t, closeAfter(t, adminClient(masters[i], nil)).Do(ctx, "CLIENT", "PAUSE", 1500, "WRITE").Err())
		}
		err := newMutex(t, rl, name+":errors").TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		errs := report.NodeErrors(err)
		require.NotEmpty(t, errs, "%v", err)
		for _, e := range errs {
			assert.NotContains(t, e.Addr, "FailoverClient", "node %d", e.Index)
			assert.Contains(t, e.Addr, masters[e.Index], "node %d is named by its current master's address (its servers: %v, first master first)",
				e.Index, s.ServerAddrs(e.Index))
		}
		t.Logf("node errors: %v", err)
	})
}

// TestDeployCluster uses a Redis Cluster as one node beside two plain
// nodes: plain, fenced and reentrant locks, with and without a hash tag in
// the name; the counter and queue keys beside the lock's key stay in its
// slot on the cluster.
func TestDeployCluster(t *testing.T) {
	t.Parallel()
	rc := startRedisCluster(t, 3)
	plain := startCluster(t, 2)
	ctx := timeout(t, 2*time.Minute)
	clients := func() []redis.UniversalClient {
		return append([]redis.UniversalClient{rc.Client(nil)}, plain.Clients(nil)...)
	}
	rl := redlockOver(t, clients())
	waiters := redlockOver(t, clients()) // another process
	cc := closeAfter(t, rc.Client(nil))
	nodes := inspector(t, plain)

	// exists reports whether key is on the cluster and on each plain node.
	exists := func(key string) []bool {
		t.Helper()
		out := []bool{cc.Exists(ctx, key).Val() == 1}
		for _, n := range nodes {
			out = append(out, n.Exists(ctx, key).Val() == 1)
		}
		return out
	}
	all := []bool{true, true, true}
	none := []bool{false, false, false}
	// A call returns at a quorum: the last node's request may still be on
	// its way, and what it changes is checked once it had time to land.
	eventually := func(t *testing.T, want []bool, key, msg string) {
		t.Helper()
		assert.Eventually(t, func() bool { return slices.Equal(want, exists(key)) }, 2*time.Second, 10*time.Millisecond,
			"%s: %s on the cluster and the plain nodes is not %v", msg, key, want)
	}

	for _, tc := range []struct{ name, clusterFence, plainFence string }{
		{"job:7", "{job:7}:redlock:fence", "job:7:redlock:fence"},
		{"{acct:9}:job", "{acct:9}:job:redlock:fence", "{acct:9}:job:redlock:fence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("plain", func(t *testing.T) {
				m := newMutex(t, rl, tc.name)
				require.NoError(t, m.Lock(ctx))
				eventually(t, all, tc.name, "held")
				wm := newMutex(t, waiters, tc.name)
				waiter := lockInBackground(ctx, wm)
				time.Sleep(300 * time.Millisecond) // it tried, queued and subscribed
				require.NoError(t, m.Unlock(ctx))
				r := await(t, waiter, 5*time.Second)
				require.NoError(t, r.err, "a waiter takes the released lock")
				require.NoError(t, wm.Unlock(ctx))
				eventually(t, none, tc.name, "released")
			})
			t.Run("fenced", func(t *testing.T) {
				m := newMutex(t, rl, tc.name, redlock.WithFencing())
				require.NoError(t, m.Lock(ctx))
				first := m.Fence()
				require.NoError(t, m.Unlock(ctx))
				require.NoError(t, m.Lock(ctx))
				second := m.Fence()
				require.NoError(t, m.Unlock(ctx))
				assert.Positive(t, first)
				assert.Greater(t, second, first, "a later acquisition has a greater token")

				if tc.clusterFence == tc.plainFence {
					eventually(t, all, tc.clusterFence, "the counter")
				} else {
					eventually(t, []bool{true, false, false}, tc.clusterFence, "the counter on the cluster only")
					eventually(t, []bool{false, true, true}, tc.plainFence, "the counter on the plain nodes only")
				}
				// The fence round returns once a quorum recorded the token;
				// a slower node (the cluster, on a loaded machine) records it
				// in the background.
				assert.Eventually(t, func() bool {
					n, err := cc.Get(ctx, tc.clusterFence).Uint64()
					return err == nil && n >= second
				}, 5*time.Second, 10*time.Millisecond, "the cluster's counter reaches %d", second)
			})
			t.Run("reentrant", func(t *testing.T) {
				m := newMutex(t, rl, tc.name, redlock.WithReentrant())
				require.NoError(t, m.Lock(ctx))
				require.NoError(t, m.Lock(ctx), "one more hold")
				require.NoError(t, m.Unlock(ctx))
				eventually(t, all, tc.name, "held while one hold is left")
				require.NoError(t, m.Unlock(ctx))
				eventually(t, none, tc.name, "released with the last hold")
			})
		})
	}

	t.Run("fenced name without a usable hash tag", func(t *testing.T) {
		_, err := rl.NewMutex("a{}b", redlock.WithFencing())
		require.ErrorIs(t, err, redlock.ErrInvalidArgument, "no key beside a{}b is in its slot")
		t.Logf("NewMutex: %v", err)
	})

	// Many locks held with renewal: their extensions due on one line go
	// together, each its own call on the cluster (its keys are on
	// different masters) and one script call on each plain node.
	t.Run("renewal of many", func(t *testing.T) { holdManyWithRenewal(t, ctx, 2*time.Second, clients) })

	t.Run("the same cluster twice", func(t *testing.T) {
		addrs := rc.Addrs()
		twice := redlockOver(t, []redis.UniversalClient{
			rc.ClientSeeded(nil, addrs[0]), rc.ClientSeeded(nil, addrs[1]), redis.NewClient(&redis.Options{Addr: plain.Addr(0)}),
		})
		start := time.Now()
		m := newMutex(t, twice, "deploy:twice")
		err := m.Lock(timeout(t, 10*time.Second))
		took := time.Since(start)
		for tries := 0; err == nil && tries < 50; tries++ {
			// The window identify.go states: nodes too slow for the first
			// acquisition's wait (a cluster client asks every master,
			// under the loaded -race suite) can still count twice in it.
			// Their answers come in the background, and from then on
			// every acquisition fails.
			t.Logf("Lock granted before the identities were in (try %d)", tries)
			require.NoError(t, m.Unlock(timeout(t, 10*time.Second)))
			time.Sleep(100 * time.Millisecond)
			start = time.Now()
			err = m.Lock(timeout(t, 10*time.Second))
			took = time.Since(start)
		}
		require.ErrorIs(t, err, redlock.ErrInvalidArgument, "two clients of the same servers would count twice")
		assert.Contains(t, err.Error(), "same")
		assert.Less(t, took, 2*time.Second)
		t.Logf("Lock after %v: %v", took, err)
	})
}

// TestDeployTLS runs the lock with a node that serves TLS only, and with
// nodes whose certificate the clients do not trust.
func TestDeployTLS(t *testing.T) {
	t.Parallel()
	tn := startTLS(t, 3)
	plain := startCluster(t, 2)
	ctx := timeout(t, time.Minute)

	secure := redis.NewClient(&redis.Options{Addr: tn[0].Addr(), TLSConfig: tn[0].ClientTLS()})
	rl := redlockOver(t, append([]redis.UniversalClient{secure}, plain.Clients(nil)...))
	m := newMutex(t, rl, "deploy:tls")
	require.NoError(t, m.Lock(ctx))
	// Lock returns with a quorum: the TLS node, whose first connection
	// also costs a handshake, may answer after the two plain ones.
	assert.Eventually(t, func() bool { return secure.Exists(ctx, "deploy:tls").Val() == 1 },
		2*time.Second, 10*time.Millisecond, "the TLS node holds the key")
	require.NoError(t, m.Unlock(ctx))

	// At go-redis' default options, a failed dial is retried 5 times,
	// 100 ms apart, apart from the call, which ends long after the node
	// timeout: the timeout names the certificate all the same.
	untrusted := func() []redis.UniversalClient {
		out := make([]redis.UniversalClient, len(tn))
		for i, n := range tn {
			out[i] = redis.NewClient(&redis.Options{Addr: n.Addr(), TLSConfig: n.UntrustedTLS()})
		}
		return out
	}
	rl = redlockOver(t, untrusted())
	start := time.Now()
	err := newMutex(t, rl, "deploy:tls").Lock(timeout(t, 10*time.Second))
	took := time.Since(start)
	t.Logf("Lock after %v: %v", took, err)
	requireMisconfigured(t, err, took, 3*time.Second)
	assert.Contains(t, err.Error(), "certificate")

	// One attempt: every node's own error names the certificate. The node
	// timeout leaves room for a loaded machine's first handshake, not for
	// go-redis' retries (400 ms and more).
	rl = redlockOver(t, untrusted(), redlock.WithNodeTimeout(300*time.Millisecond))
	err = newMutex(t, rl, "deploy:tls").TryLock(ctx)
	t.Logf("TryLock: %v", err)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, redlock.ErrMisconfigured)
	require.Len(t, report.NodeErrors(err), len(tn))
	for _, ne := range report.NodeErrors(err) {
		assert.ErrorIs(t, ne, redlock.ErrMisconfigured, "node %d", ne.Index)
		assert.ErrorContains(t, ne, "x509: certificate signed by unknown authority")
	}
}

// TestDeployACL runs the lock as ACL users: with the least privileges it
// needs, without pub/sub channels, and with keys elsewhere.
func TestDeployACL(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	admin := inspector(t, c)
	ctx := timeout(t, 2*time.Minute)
	const name = "locks:job"

	t.Run("least privilege", func(t *testing.T) {
		setUser(t, ctx, admin, leastPrivilegeACL("locker", "pw", "locks:"))
		rl := redlockOver(t, userClients(c, "locker", "pw"))
		for _, opts := range [][]redlock.LockOption{nil, {redlock.WithFencing()}, {redlock.WithReentrant()}} {
			m := newMutex(t, rl, name, opts...)
			require.NoError(t, m.Lock(ctx), "options %d", len(opts))
			require.NoError(t, m.Unlock(ctx))
		}

		// A waiter is woken by the release's announcement, long before
		// its back-off (at least 2 s) would let it try again.
		holder := newMutex(t, rl, name)
		require.NoError(t, holder.Lock(ctx))
		other := redlockOver(t, userClients(c, "locker", "pw"))
		wm := newMutex(t, other, name, redlock.WithRetryDelay(2*time.Second, 4*time.Second))
		waiter := lockInBackground(ctx, wm)
		awaitQueued(t, ctx, admin, name)
		unlocked := time.Now()
		require.NoError(t, holder.Unlock(ctx))
		r := await(t, waiter, 5*time.Second)
		require.NoError(t, r.err)
		assert.Less(t, r.at.Sub(unlocked), 500*time.Millisecond, "woken by the announcement, not by its back-off")
		require.NoError(t, wm.Unlock(ctx))
	})

	t.Run("no channels", func(t *testing.T) {
		// Redis 7 gives a new user no channels (acl-pubsub-default
		// resetchannels): the release script's PUBLISH is refused.
		setUser(t, ctx, admin, []any{"ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all"})
		rl := redlockOver(t, userClients(c, "app", "pw"))
		other := redlockOver(t, userClients(c, "app", "pw"))
		holder := newMutex(t, rl, name+":nochan")
		require.NoError(t, holder.Lock(ctx))
		wm := newMutex(t, other, name+":nochan")
		waiter := lockInBackground(ctx, wm)
		time.Sleep(300 * time.Millisecond) // it tried, and polls
		unlocked := time.Now()
		assert.NoError(t, holder.Unlock(ctx), "the release's announcement is refused, the release is not")
		r := await(t, waiter, 5*time.Second)
		require.NoError(t, r.err, "the waiter polls")
		assert.Less(t, r.at.Sub(unlocked), 2*time.Second)
		require.NoError(t, wm.Unlock(ctx))
	})

	t.Run("keys elsewhere", func(t *testing.T) {
		setUser(t, ctx, admin, leastPrivilegeACL("other", "pw", "other:"))
		rl := redlockOver(t, userClients(c, "other", "pw"))
		start := time.Now()
		err := newMutex(t, rl, name).Lock(timeout(t, 10*time.Second))
		took := time.Since(start)
		requireMisconfigured(t, err, took, time.Second)
		var noperm bool
		for _, e := range report.NodeErrors(err) {
			noperm = noperm || strings.Contains(e.Error(), "NOPERM")
		}
		assert.True(t, noperm, "a node error says NOPERM: %v", err)
		t.Logf("Lock after %v: %v", took, err)
	})
}

// TestDeployWrongType runs the lock on a name another program uses for
// something else than a lock.
func TestDeployWrongType(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	nodes := inspector(t, c)
	ctx := timeout(t, time.Minute)
	rl := newRedlock(t, c)

	t.Run("a list", func(t *testing.T) {
		for _, n := range nodes {
			require.NoError(t, n.RPush(ctx, "locks:list", "x").Err())
		}
		start := time.Now()
		err := newMutex(t, rl, "locks:list").Lock(timeout(t, 10*time.Second))
		took := time.Since(start)
		require.ErrorIs(t, err, redlock.ErrMisconfigured)
		assert.Contains(t, err.Error(), "not a lock")
		assert.Less(t, took, time.Second)
		for i, n := range nodes {
			assert.Equal(t, "list", n.Type(ctx, "locks:list").Val(), "node %d: the list is left alone", i)
		}
		t.Logf("Lock after %v: %v", took, err)
	})

	t.Run("a lock of the other kind is held", func(t *testing.T) {
		other := newRedlock(t, c)
		for i, tc := range []struct {
			kind        string
			holder, try []redlock.LockOption
		}{
			{"reentrant holds, plain tries", []redlock.LockOption{redlock.WithReentrant()}, nil},
			{"plain holds, reentrant tries", nil, []redlock.LockOption{redlock.WithReentrant()}},
		} {
			name := fmt.Sprintf("locks:kind:%d", i)
			holder := newMutex(t, rl, name, tc.holder...)
			require.NoError(t, holder.Lock(ctx), tc.kind)
			err := newMutex(t, other, name, tc.try...).TryLock(ctx)
			assert.ErrorIs(t, err, redlock.ErrNotAcquired, tc.kind)
			assert.NotErrorIs(t, err, redlock.ErrMisconfigured, "%s: a lock is not a misconfiguration: %v", tc.kind, err)
			require.NoError(t, holder.Unlock(ctx), tc.kind)
		}
	})
}
