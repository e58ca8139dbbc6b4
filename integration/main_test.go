package integration

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

func TestMain(m *testing.M) {
	if os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") == "" {
		// Without it testcontainers dials the default gateway on machines
		// where it believes it runs in a container. Never skip: say how.
		println("integration: TESTCONTAINERS_HOST_OVERRIDE is unset; run these tests with `make test` " +
			"(or through scripts/with-redis-env.sh), which prepares Docker, the Redis image and the environment")
		os.Exit(1)
	}
	goleak.VerifyTestMain(m,
		// The Docker client's HTTP keep-alive connections outlive the tests
		// by design; they belong to testcontainers' shared provider.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("github.com/testcontainers/testcontainers-go.(*Reaper).connect.func1"),
	)
}

// startCluster starts n Redis nodes for one test and terminates them after.
func startCluster(tb testing.TB, n int, opts ...Option) *Cluster {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, n, opts...)
	require.NoError(tb, err, "start %d Redis nodes", n)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(tb, c.Close(ctx))
	})
	return c
}

// newRedlock returns a Redlock with its own clients (as a separate process
// would have, at go-redis' default options), closed after the test.
func newRedlock(tb testing.TB, c nodeSet, opts ...redlock.Option) *redlock.Redlock {
	tb.Helper()
	if o, ok := c.(overClient); ok {
		addrs := make([]string, o.Len())
		for i := range addrs {
			addrs[i] = o.Addr(i)
		}
		return otherOver(tb, o.client, specsOf(addrs...), opts...)
	}
	clients := c.Clients(nil)
	rl, err := redlock.New(clients, opts...)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(tb, rl.Close(ctx), "background node calls did not finish")
		for _, cl := range clients {
			_ = cl.Close()
		}
	})
	return rl
}

func newMutex(tb testing.TB, rl *redlock.Redlock, name string, opts ...redlock.LockOption) *redlock.Mutex {
	tb.Helper()
	m, err := rl.NewMutex(name, opts...)
	require.NoError(tb, err)
	return m
}

// inspector returns direct clients to every node, for reading and planting
// keys behind the lock's back.
func inspector(t *testing.T, c nodeSet) []*redis.Client {
	t.Helper()
	out := make([]*redis.Client, c.Len())
	for i := range out {
		// One dial per read: a killed node reads as "<down>" at once,
		// not after go-redis' five dial attempts.
		out[i] = redis.NewClient(&redis.Options{Addr: c.Addr(i), MaxRetries: -1, DialerRetries: 1})
		cl := out[i]
		t.Cleanup(func() { _ = cl.Close() })
	}
	return out
}

// values returns key's value on every node ("" where absent; "<down>" where
// the node does not answer).
func values(t *testing.T, nodes []*redis.Client, key string) []string {
	t.Helper()
	out := make([]string, len(nodes))
	for i, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		v, err := n.Get(ctx, key).Result()
		cancel()
		switch {
		case errors.Is(err, redis.Nil):
			out[i] = ""
		case err != nil:
			out[i] = "<down>"
		default:
			out[i] = v
		}
	}
	return out
}

// requireTimedOut checks an attempt that failed because the given nodes
// stayed silent: ErrNotAcquired, one ErrNodeTimeout per silent node, and a
// duration of about one node timeout.
func requireTimedOut(t *testing.T, err error, took, nodeTimeout time.Duration, silent ...int) {
	t.Helper()
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	errs := report.NodeErrors(err)
	assert.ElementsMatch(t, silent, indexes(errs))
	for _, e := range errs {
		assert.ErrorIs(t, e, report.ErrNodeTimeout)
	}
	assert.GreaterOrEqual(t, took, nodeTimeout)
	assert.Less(t, took, 2*nodeTimeout, "took %v: more than about one node timeout", took)
}

func indexes(errs []*report.NodeError) []int {
	out := make([]int, len(errs))
	for i, e := range errs {
		out[i] = e.Index
	}
	return out
}

// notHeldOrUnconfirmed reports whether err, a release's, says the lock was
// not held (ErrNotHeld), or that the nodes left it neither confirmed nor
// refuted ("release not confirmed": a node that restarted, failed over or
// jumped its clock answered for it, which the release cannot tell from its
// own earlier try's doing).
func notHeldOrUnconfirmed(err error) bool {
	return errors.Is(err, redlock.ErrNotHeld) || err != nil && strings.Contains(err.Error(), "release not confirmed")
}
