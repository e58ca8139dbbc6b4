package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlockrueidis"
)

// rueidisOver returns a Redlock made by redlockrueidis.New over a new
// rueidis client per option set, all closed when tb ends.
func rueidisOver(tb testing.TB, opts []rueidis.ClientOption, newOpts ...redlock.Option) *redlock.Redlock {
	tb.Helper()
	clients := make([]rueidis.Client, len(opts))
	for i, o := range opts {
		c, err := rueidis.NewClient(o)
		require.NoError(tb, err, "rueidis client of %v", o.InitAddress)
		tb.Cleanup(c.Close)
		clients[i] = c
	}
	rl, err := redlockrueidis.New(clients, newOpts...)
	require.NoError(tb, err)
	tb.Cleanup(func() { // before the clients' Close: cleanups run last first
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(tb, rl.Close(ctx), "background node calls did not finish")
	})
	return rl
}

// rueidisEach is the option set of a client of each address, with base's
// other options.
func rueidisEach(base rueidis.ClientOption, addrs ...string) []rueidis.ClientOption {
	out := make([]rueidis.ClientOption, len(addrs))
	for i, a := range addrs {
		out[i] = base
		out[i].InitAddress = []string{a}
	}
	return out
}

// rueidisMade is the Redlocks of a workload over rueidis clients made as
// opts says, a new set for each.
func rueidisMade(opts func() []rueidis.ClientOption, newOpts ...redlock.Option) redlocksOf {
	return func(t *testing.T, _ int) *redlock.Redlock {
		t.Helper()
		return rueidisOver(t, opts(), newOpts...)
	}
}

// TestSafetyRueidis runs the safety workload (every lock kind, contended,
// overlap, lost-update and fencing checks) over rueidis clients, in the
// shapes users deploy: plain servers, Redis Clusters, Sentinel-managed
// masters, TLS, and the ACL user of docs/DEPLOYMENTS.md's line.
func TestSafetyRueidis(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) {
		c := startCluster(t, 5)
		addrs := make([]string, c.Len())
		for i := range addrs {
			addrs[i] = c.Addr(i)
		}
		eachKindOver(t, rueidisMade(func() []rueidis.ClientOption { return rueidisEach(rueidis.ClientOption{}, addrs...) }), "rueidis:plain")
		t.Run("without scripts", func(t *testing.T) {
			safetyOver(t, rueidisMade(func() []rueidis.ClientOption { return rueidisEach(rueidis.ClientOption{}, addrs[:3]...) },
				redlock.WithoutScripts()), "rueidis:noscripts", plainKind)
		})
	})
	t.Run("cluster", func(t *testing.T) {
		rcs := startRedisClusters(t, 3, 3)
		opts := func() []rueidis.ClientOption {
			out := make([]rueidis.ClientOption, len(rcs))
			for i, rc := range rcs {
				out[i] = rueidis.ClientOption{InitAddress: rc.Addrs()}
			}
			return out
		}
		for _, name := range []string{"rueidis:job:7", "{acct:9}:rueidis"} {
			t.Run(name, func(t *testing.T) { eachKindOver(t, rueidisMade(opts), name) })
		}
	})
	t.Run("sentinel", func(t *testing.T) {
		s := startSentinel(t, 3)
		opts := func() []rueidis.ClientOption {
			out := make([]rueidis.ClientOption, s.Len())
			for i := range out {
				out[i] = rueidis.ClientOption{InitAddress: s.SentinelAddrs(), Sentinel: rueidis.SentinelOption{MasterSet: s.MasterName(i)}}
			}
			return out
		}
		eachKindOver(t, rueidisMade(opts), "rueidis:sentinel")
	})
	t.Run("TLS", func(t *testing.T) {
		tn := startTLS(t, 3)
		opts := func() []rueidis.ClientOption {
			out := make([]rueidis.ClientOption, len(tn))
			for i, n := range tn {
				out[i] = rueidis.ClientOption{InitAddress: []string{n.Addr()}, TLSConfig: n.ClientTLS()}
			}
			return out
		}
		eachKindOver(t, rueidisMade(opts), "rueidis:tls")
	})
	t.Run("ACL", func(t *testing.T) {
		c := startCluster(t, 3)
		user, pass := fullLineUser(timeout(t, time.Minute), t, inspector(t, c))
		addrs := []string{c.Addr(0), c.Addr(1), c.Addr(2)}
		// The documented line grants no CLIENT TRACKING, which rueidis'
		// client-side caching asks for on every connection.
		base := rueidis.ClientOption{Username: user, Password: pass, DisableCache: true}
		eachKindOver(t, rueidisMade(func() []rueidis.ClientOption { return rueidisEach(base, addrs...) }), "locks:rueidis:acl")
	})
}

// TestRueidisNodeKilled kills one node of three under a Redlock over
// rueidis clients: locks go on with the other two, and the killed node's
// restart is taken back.
func TestRueidisNodeKilled(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := timeout(t, 2*time.Minute)
	addrs := []string{c.Addr(0), c.Addr(1), c.Addr(2)}
	rl := rueidisOver(t, rueidisEach(rueidis.ClientOption{}, addrs...))
	lockOnce := func(name string) error {
		m, err := rl.NewMutex(name, redlock.WithTTL(5*time.Second))
		require.NoError(t, err)
		if err := m.LockWithin(ctx, 3*time.Second); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}
	require.NoError(t, lockOnce("rueidis:kill:0"))
	require.NoError(t, c.Kill(ctx, 2))
	for i := range 5 {
		require.NoError(t, lockOnce(fmt.Sprintf("rueidis:kill:%d", i+1)), "with one node of three killed")
	}
	down := false
	for _, h := range rl.Health() {
		down = down || h.Down
	}
	assert.True(t, down, "the killed node is seen down: %+v", rl.Health())
	require.NoError(t, c.Restart(ctx, 2))
	require.Eventually(t, func() bool {
		for _, h := range rl.Health() {
			if h.Down {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the restarted node is taken back")
	require.NoError(t, lockOnce("rueidis:kill:after"))
}

// TestRueidisChecksClients checks redlockrueidis.New's refusals.
func TestRueidisChecksClients(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	a, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{c.Addr(0)}})
	require.NoError(t, err)
	defer a.Close()
	b, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{c.Addr(0)}})
	require.NoError(t, err)
	defer b.Close()
	for name, clients := range map[string][]rueidis.Client{
		"none": nil, "nil": {a, nil}, "twice": {a, a}, "same server": {a, b},
	} {
		_, err := redlockrueidis.New(clients)
		assert.True(t, errors.Is(err, redlock.ErrInvalidArgument), "%s: %v", name, err)
	}
	_, err = redlockrueidis.New([]rueidis.Client{a}, redlock.WithTTL(-time.Second))
	assert.ErrorIs(t, err, redlock.ErrInvalidArgument)
}
