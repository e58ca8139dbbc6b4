package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	valkey "github.com/valkey-io/valkey-go"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlockrueidis"
	"github.com/redlock-go/redlock/redlockvalkey"
)

// The clients besides go-redis that a Redlock may be built over, by name:
// redlockrueidis.New over rueidis, redlockvalkey.New over valkey-go.
var otherClients = []string{"rueidis", "valkey-go"}

// nodeSpec is how to reach one node, whatever the client: a server's
// address, a cluster's seeds or a Sentinel-managed master's sentinels
// (master set), over TLS or not, as a user or not; with the client's
// client-side caching on (its default) or off.
type nodeSpec struct {
	addrs      []string
	master     string
	tls        *tls.Config
	user, pass string
	cache      bool
}

// specsOf is a nodeSpec of each address: one server each, spoken to at
// the client's defaults.
func specsOf(addrs ...string) []nodeSpec {
	out := make([]nodeSpec, len(addrs))
	for i, a := range addrs {
		out[i] = nodeSpec{addrs: []string{a}, cache: true}
	}
	return out
}

// otherOver returns a Redlock over a new client of client's kind per node
// of specs, all closed when tb ends. Where a spec turns client-side caching
// off, the client asks no CLIENT TRACKING on its connections (which the
// documented ACL line does not grant).
func otherOver(tb testing.TB, client string, specs []nodeSpec, newOpts ...redlock.Option) *redlock.Redlock {
	tb.Helper()
	var rl *redlock.Redlock
	var err error
	switch client {
	case "rueidis":
		clients := make([]rueidis.Client, len(specs))
		for i, s := range specs {
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: s.addrs, TLSConfig: s.tls, Username: s.user, Password: s.pass,
				DisableCache: !s.cache, Sentinel: rueidis.SentinelOption{MasterSet: s.master}})
			require.NoError(tb, err, "rueidis client of %v", s.addrs)
			tb.Cleanup(c.Close)
			clients[i] = c
		}
		rl, err = redlockrueidis.New(clients, newOpts...)
	case "valkey-go":
		clients := make([]valkey.Client, len(specs))
		for i, s := range specs {
			c, err := valkey.NewClient(valkey.ClientOption{InitAddress: s.addrs, TLSConfig: s.tls, Username: s.user, Password: s.pass,
				DisableCache: !s.cache, Sentinel: valkey.SentinelOption{MasterSet: s.master}})
			require.NoError(tb, err, "valkey-go client of %v", s.addrs)
			tb.Cleanup(c.Close)
			clients[i] = c
		}
		rl, err = redlockvalkey.New(clients, newOpts...)
	default:
		tb.Fatalf("no client %q", client)
	}
	require.NoError(tb, err)
	tb.Cleanup(func() { // before the clients' Close: cleanups run last first
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(tb, rl.Close(ctx), "background node calls did not finish")
	})
	return rl
}

// overClient is a node set whose Redlocks (newRedlock's) are built over
// clients of another kind.
type overClient struct {
	nodeSet
	client string
}

// otherMade is the Redlocks of a workload over new clients of client's
// kind, one per node of specs, a new set for each Redlock.
func otherMade(client string, specs []nodeSpec, newOpts ...redlock.Option) redlocksOf {
	return func(t *testing.T, _ int) *redlock.Redlock {
		t.Helper()
		return otherOver(t, client, specs, newOpts...)
	}
}

// TestSafetyOtherClients runs the safety workload (every lock kind,
// contended, with the overlap, lost-update and fencing checks) over rueidis
// and valkey-go clients, in the shapes users deploy: plain servers (and
// without scripts), Redis Clusters, Sentinel-managed masters, TLS, and the
// user of docs/DEPLOYMENTS.md's ACL line.
func TestSafetyOtherClients(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 5)
	var plain []string
	for i := range c.Len() {
		plain = append(plain, c.Addr(i))
	}
	rcs := startRedisClusters(t, 3, 3)
	clusters := make([]nodeSpec, len(rcs))
	for i, rc := range rcs {
		clusters[i] = nodeSpec{addrs: rc.Addrs()}
	}
	s := startSentinel(t, 3)
	sentinels := make([]nodeSpec, s.Len())
	for i := range sentinels {
		sentinels[i] = nodeSpec{addrs: s.SentinelAddrs(), master: s.MasterName(i)}
	}
	tn := startTLS(t, 3)
	tlsNodes := make([]nodeSpec, len(tn))
	for i, n := range tn {
		tlsNodes[i] = nodeSpec{addrs: []string{n.Addr()}, tls: n.ClientTLS()}
	}
	acl := startCluster(t, 3)
	user, pass := fullLineUser(timeout(t, time.Minute), t, inspector(t, acl))
	var users []nodeSpec
	for i := range acl.Len() {
		users = append(users, nodeSpec{addrs: []string{acl.Addr(i)}, user: user, pass: pass})
	}
	for _, client := range otherClients {
		t.Run(client, func(t *testing.T) {
			eachKindOver(t, otherMade(client, specsOf(plain...)), client+":plain")
			t.Run("without scripts", func(t *testing.T) {
				safetyOver(t, otherMade(client, specsOf(plain[:3]...), redlock.WithoutScripts()), client+":noscripts", plainKind)
			})
			for _, name := range []string{client + ":job:7", "{acct:9}:" + client} {
				t.Run("cluster "+name, func(t *testing.T) { eachKindOver(t, otherMade(client, clusters), name) })
			}
			t.Run("sentinel", func(t *testing.T) { eachKindOver(t, otherMade(client, sentinels), client+":sentinel") })
			t.Run("TLS", func(t *testing.T) { eachKindOver(t, otherMade(client, tlsNodes), client+":tls") })
			t.Run("ACL", func(t *testing.T) { eachKindOver(t, otherMade(client, users), "locks:"+client+":acl") })
		})
	}
}

// TestOtherClientsNodeKilled kills one node of three under a Redlock over
// each other client: locks go on with the other two, the killed node is
// seen down, and taken back once restarted.
func TestOtherClientsNodeKilled(t *testing.T) {
	t.Parallel()
	for _, client := range otherClients {
		t.Run(client, func(t *testing.T) {
			c := startCluster(t, 3)
			ctx := timeout(t, 2*time.Minute)
			rl := otherOver(t, client, specsOf(c.Addr(0), c.Addr(1), c.Addr(2)))
			lockOnce := func(name string) error {
				m, err := rl.NewMutex(name, redlock.WithTTL(5*time.Second))
				require.NoError(t, err)
				if err := m.LockWithin(ctx, 3*time.Second); err != nil {
					return err
				}
				return m.Unlock(ctx)
			}
			require.NoError(t, lockOnce("kill:0"))
			require.NoError(t, c.Kill(ctx, 2))
			for i := range 5 {
				require.NoError(t, lockOnce(fmt.Sprintf("kill:%d", i+1)), "with one node of three killed")
			}
			down := func() bool {
				for _, h := range rl.Health() {
					if h.Down {
						return true
					}
				}
				return false
			}
			assert.True(t, down(), "the killed node is seen down: %+v", rl.Health())
			require.NoError(t, c.Restart(ctx, 2))
			require.Eventually(t, func() bool { return !down() }, 30*time.Second, 50*time.Millisecond, "the restarted node is taken back")
			require.NoError(t, lockOnce("kill:after"))
		})
	}
}

// TestOtherClientsCheckClients checks the refusals of redlockrueidis.New
// and redlockvalkey.New: two clients of one server.
func TestOtherClientsCheckClients(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1)
	r1, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{c.Addr(0)}})
	require.NoError(t, err)
	defer r1.Close()
	r2, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{c.Addr(0)}})
	require.NoError(t, err)
	defer r2.Close()
	_, err = redlockrueidis.New([]rueidis.Client{r1, r2})
	assert.ErrorIs(t, err, redlock.ErrInvalidArgument, "rueidis: two clients of one server")
	v1, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{c.Addr(0)}})
	require.NoError(t, err)
	defer v1.Close()
	v2, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{c.Addr(0)}})
	require.NoError(t, err)
	defer v2.Close()
	_, err = redlockvalkey.New([]valkey.Client{v1, v2})
	assert.ErrorIs(t, err, redlock.ErrInvalidArgument, "valkey-go: two clients of one server")
}
