package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// Replicated masters: nodes 0-2 of a six-node cluster are masters, and
// node i+3 is node i's replica. WithReplicaAck makes a grant count only
// once a replica has it; these tests stop replicas, kill masters and
// promote replicas as a failover would.

// replicated starts six nodes and makes node i+3 a replica of node i, in
// sync, for i in 0..2.
func replicated(tb testing.TB) *Cluster {
	tb.Helper()
	c := startCluster(tb, 6)
	ctx := timeout(tb, time.Minute)
	for i := range 3 {
		r := adminClient(c.Addr(i+3), nil)
		host, port, _ := net.SplitHostPort(c.Addr(i))
		require.NoError(tb, r.Do(ctx, "REPLICAOF", host, port).Err())
		_ = r.Close()
		require.NoError(tb, poll(ctx, "replica in sync", func(ctx context.Context) error {
			return replicaOf(ctx, c.Addr(i+3), c.Addr(i))
		}))
	}
	return c
}

// redlockOn returns a Redlock over the given nodes of c only.
func redlockOn(tb testing.TB, c *Cluster, nodes []int, opts ...redlock.Option) *redlock.Redlock {
	tb.Helper()
	var clients []redis.UniversalClient
	for _, i := range nodes {
		clients = append(clients, redis.NewClient(&redis.Options{Addr: c.Addr(i)}))
	}
	return redlockOver(tb, clients, opts...)
}

// get reads key on node i of c.
func get(t *testing.T, c *Cluster, i int, key string) string {
	t.Helper()
	a := adminClient(c.Addr(i), nil)
	defer func() { _ = a.Close() }()
	v, err := a.Get(t.Context(), key).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// cutOff stops node i's replica (node i+3) and kills its replication link
// on the master: a stopped replica alone would still read the writes from
// its socket buffer when it resumes.
func cutOff(t *testing.T, c *Cluster, i int) {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, c.Pause(ctx, i+3))
	t.Cleanup(func() { _ = c.Unpause(context.Background(), i+3) })
	m := adminClient(c.Addr(i), nil)
	defer func() { _ = m.Close() }()
	require.NoError(t, m.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err())
}

// promote kills master i and makes its replica a master, as a failover
// does; a replica that was cut off resumes only once its master is dead,
// so that it cannot sync from it again.
func promote(t *testing.T, c *Cluster, i int, cut bool) {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, c.Kill(ctx, i))
	if cut {
		require.NoError(t, c.Unpause(ctx, i+3))
	}
	r := adminClient(c.Addr(i+3), nil)
	defer func() { _ = r.Close() }()
	require.NoError(t, r.Do(ctx, "REPLICAOF", "NO", "ONE").Err())
}

// With its replica stopped, a node's grant does not count, and the failure
// names the node and the cause; with two of three so, the acquisition
// fails and is undone on every node. Extensions are acknowledged too, and
// so is a grant on a node that lost its scripts.
// The acknowledgement waits 1.5 s: a live replica answers WAIT's GETACK at
// once, and otherwise acknowledges on its own once a second; 400 ms missed
// a live replica in one CI run and in one local run of six. The node
// timeout (4 s) covers two such waits: a node that lost its scripts waits
// once after the refused script and once after its EVAL.
func TestReplicaAckStoppedReplica(t *testing.T) {
	c := replicated(t)
	obs := &failures{}
	rl := redlockOn(t, c, []int{0, 1, 2}, redlock.WithObserver(obs),
		redlock.WithNodeTimeout(4*time.Second), redlock.WithReplicaAck(1, 1500*time.Millisecond))
	ctx := t.Context()
	m := newMutex(t, rl, "replica:held", redlock.WithTTL(10*time.Second))
	require.NoError(t, m.TryLock(ctx), "every replica acknowledges")
	require.NoError(t, m.Extend(ctx))

	require.NoError(t, c.Pause(ctx, 3))
	t.Cleanup(func() { _ = c.Unpause(context.Background(), 3) })
	// Node 0 forgets its scripts, as a restarted or promoted master has:
	// its grant runs as EVAL after a NOSCRIPT, and its WAIT must follow
	// the EVAL, not the EVALSHA that wrote nothing (which a stopped
	// replica's last acknowledgement covers at once).
	flush := adminClient(c.Addr(0), nil)
	require.NoError(t, flush.ScriptFlush(ctx).Err())
	_ = flush.Close()
	since := time.Now()
	other := newMutex(t, rl, "replica:one-stopped")
	require.NoError(t, other.TryLock(ctx), "nodes 1 and 2 acknowledged")
	// Node 0 answers after two WAITs (the one after the refused EVALSHA,
	// then the one after the EVAL), each of them the full 1.5 s.
	require.Eventually(t, func() bool { return len(obs.of(0, since)) > 0 }, 5*time.Second, 10*time.Millisecond)
	f := obs.of(0, since)[0]
	assert.ErrorIs(t, f.e, report.ErrNotReplicated, "the node it did without, reported: %v", f.e)
	assert.Contains(t, f.e.Error(), "0 of 1 replicas acknowledged within 1.5s")
	assert.Equal(t, c.Addr(0), f.e.Addr)

	err := m.Extend(ctx)
	require.NoError(t, err, "two of three extensions acknowledged")
	require.NoError(t, c.Pause(ctx, 4))
	t.Cleanup(func() { _ = c.Unpause(context.Background(), 4) })
	err = m.Extend(ctx)
	require.ErrorContains(t, err, "extension not confirmed", "one acknowledged extension of three")
	assert.NotErrorIs(t, err, redlock.ErrNotHeld, "the unacknowledged hold the token")
	assert.ErrorIs(t, err, report.ErrNotReplicated)

	failed := newMutex(t, rl, "replica:two-stopped")
	err = failed.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	var named []int
	for _, e := range report.NodeErrors(err) {
		assert.ErrorIs(t, e, report.ErrNotReplicated)
		named = append(named, e.Index)
	}
	assert.ElementsMatch(t, []int{0, 1}, named, "each node named with its cause: %v", err)
	require.Eventually(t, func() bool {
		return get(t, c, 0, failed.Name())+get(t, c, 1, failed.Name())+get(t, c, 2, failed.Name()) == ""
	}, 2*time.Second, 10*time.Millisecond, "undone on every node")
	require.NoError(t, other.Unlock(ctx))
}

// A lock taken with acknowledgement survives its master's death: the
// promoted replica has the key, and another client cannot take the lock
// there. The same without acknowledgement, its replica cut off during the
// grant, loses the key on promotion: a client then takes the lock there.
func TestReplicaAckSurvivesFailover(t *testing.T) {
	for _, ack := range []bool{true, false} {
		name := map[bool]string{true: "acknowledged", false: "not acknowledged"}[ack]
		t.Run(name, func(t *testing.T) {
			c := replicated(t)
			ctx := t.Context()
			opts := []redlock.Option{redlock.WithNodeTimeout(300 * time.Millisecond)}
			if ack {
				opts = append(opts, redlock.WithReplicaAck(1, 100*time.Millisecond))
			} else {
				cutOff(t, c, 0)
			}
			holder := newMutex(t, redlockOn(t, c, []int{0, 1, 2}, opts...), "replica:failover", redlock.WithTTL(time.Minute))
			require.NoError(t, holder.TryLock(ctx))
			require.Eventually(t, func() bool { return get(t, c, 0, holder.Name()) != "" }, time.Second, 5*time.Millisecond,
				"master 0 granted")
			held := get(t, c, 0, holder.Name())

			promote(t, c, 0, !ack)
			next := newMutex(t, redlockOn(t, c, []int{3}), holder.Name())
			if ack {
				assert.Equal(t, held, get(t, c, 3, holder.Name()), "the promoted replica has the key")
				assert.ErrorIs(t, next.TryLock(ctx), redlock.ErrNotAcquired, "and refuses another client")
				return
			}
			assert.Empty(t, get(t, c, 3, holder.Name()), "the promoted replica never got the key")
			assert.NoError(t, next.TryLock(ctx), "and grants it to another client while the holder holds it")
		})
	}
}

// BenchmarkReplicaAck is the cost of the acknowledgement: one lock+unlock
// pair per op on three masters, each with a replica in sync, without and
// with WithReplicaAck(1, ...), reporting the pair's p50 and p99:
//
//	scripts/with-redis-env.sh go test -run '^$' -bench ReplicaAck -benchtime 1000x -count 3 ./integration/
func BenchmarkReplicaAck(b *testing.B) {
	c := replicated(b)
	for _, ack := range []bool{false, true} {
		opts := []redlock.Option{redlock.WithNodeTimeout(300 * time.Millisecond)}
		name := "off"
		if ack {
			opts, name = append(opts, redlock.WithReplicaAck(1, 200*time.Millisecond)), "replicas=1"
		}
		rl := redlockOn(b, c, []int{0, 1, 2}, opts...)
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			var took []time.Duration
			i := 0
			for b.Loop() {
				i++
				m, err := rl.NewMutex(fmt.Sprintf("bench:ack:%s:%d", name, i))
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if err := m.TryLock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := m.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}
