package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// The audit against servers configured each way: each finding where it
// applies, and nowhere else.

// synced are server options that keep every write across a restart: the
// nodes of these tests have them unless a test is about persistence.
var synced = []string{"--appendonly", "yes", "--appendfsync", "always", "--dir", "/data"}

// with is synced followed by more options.
func with(more ...string) []string { return append(append([]string(nil), synced...), more...) }

// findings are a node's findings above info, as "severity code".
func findings(a *report.NodeAudit) []string {
	var out []string
	for _, f := range a.Findings {
		if f.Severity > report.SeverityInfo {
			out = append(out, f.Severity.String()+" "+f.Code)
		}
	}
	return out
}

// clientsOf returns a client per address with opts (nil: defaults), closed
// after the test.
func clientsOf(t *testing.T, opts *redis.Options, addrs ...string) []redis.UniversalClient {
	t.Helper()
	out := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		o := &redis.Options{}
		if opts != nil {
			*o = *opts
		}
		o.Addr = a
		c := redis.NewClient(o)
		out[i] = c
		t.Cleanup(func() { _ = c.Close() })
	}
	return out
}

// auditOf audits clients with opts and returns what it found.
func auditOf(t *testing.T, clients []redis.UniversalClient, opts ...redlock.Option) []report.NodeAudit {
	t.Helper()
	rl, err := redlock.New(clients, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	audits, err := rl.Audit(ctx)
	require.NoError(t, err)
	return audits
}

// Eviction and persistence, node by node.
func TestAuditEvictionAndPersistence(t *testing.T) {
	t.Parallel()
	nodes := []struct {
		args []string
		want []string
	}{
		{with("--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru"), []string{"unsafe eviction"}},
		{with("--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"), []string{"unsafe eviction"}},
		{with("--maxmemory", "100mb", "--maxmemory-policy", "noeviction"), nil},
		{[]string{"--appendonly", "no"}, []string{"unsafe persistence"}},
		{with(), nil},
		{with("--appendfsync", "everysec"), []string{"unsafe persistence"}},
		{with("--appendfsync", "no"), []string{"unsafe persistence"}},
	}
	args := make([][]string, len(nodes))
	for i, n := range nodes {
		args[i] = n.args
	}
	c := startCluster(t, len(nodes), WithArgs(args...))
	audits := auditOf(t, c.Clients(nil))
	for i, n := range nodes {
		require.NoError(t, audits[i].Err)
		assert.Equal(t, n.want, findings(&audits[i]), "node %d %v: %v", i, n.args, audits[i].Findings)
	}
	assert.Equal(t, "volatile-lru", audits[0].Policy)
	assert.Equal(t, int64(100<<20), audits[0].MaxMemory)
	assert.Equal(t, "everysec", audits[5].AppendFsync)
	assert.False(t, audits[3].AppendOnly)
	assert.Equal(t, "redis", audits[4].Server)
	assert.NotEmpty(t, audits[4].Version)
	assert.Equal(t, "master", audits[4].Role)
	assert.Contains(t, audits[4].Ways, "scripts")

	// The restart delay covers a node without an append-only file.
	delayed := auditOf(t, clientsOf(t, nil, c.Addr(3)), redlock.WithRestartDelay(30*time.Second))
	assert.Empty(t, findings(&delayed[0]), "%v", delayed[0].Findings)
}

// A replica attached to a node is unsafe unless its grants wait for it;
// a replica given as a node refuses writes.
func TestAuditReplica(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, WithArgs(synced, synced))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	admin := inspector(t, c)
	host, port, _ := net.SplitHostPort(c.Addr(0))
	require.NoError(t, admin[1].Do(ctx, "replicaof", host, port).Err())
	require.NoError(t, poll(ctx, "replica connected", func(ctx context.Context) error {
		if err := replicaOf(ctx, c.Addr(1), c.Addr(0)); err != nil {
			return err
		}
		if info := admin[0].Info(ctx, "replication").Val(); !strings.Contains(info, "connected_slaves:1") {
			return fmt.Errorf("master: %s", info)
		}
		return nil
	}))

	master := auditOf(t, clientsOf(t, nil, c.Addr(0)))[0]
	assert.Equal(t, []string{"unsafe replication"}, findings(&master), "%v", master.Findings)
	assert.Equal(t, 1, master.Replicas)
	acked := auditOf(t, clientsOf(t, nil, c.Addr(0)), redlock.WithNodeTimeout(2*time.Second), redlock.WithReplicaAck(1, time.Second))[0]
	assert.Empty(t, findings(&acked), "%v", acked.Findings)
	// redlock doctor judges the same, told the replicas the clients wait for.
	cli := cliRunner{bin: buildCLI(t), nodes: "redis://" + c.Addr(0)}
	code, out, stderr := cli.run(t, "doctor")
	assert.Equal(t, 1, code, "%s%s", out, stderr)
	assert.Contains(t, out, c.Addr(0)+": unsafe replication")
	code, out, stderr = cli.run(t, "doctor", "--replica-ack", "1")
	t.Logf("redlock doctor --replica-ack 1, exit %d:\n%s%s", code, out, stderr)
	assert.Equal(t, 0, code)
	assert.NotContains(t, out, "unsafe")
	replica := auditOf(t, clientsOf(t, nil, c.Addr(1)))[0]
	assert.Equal(t, []string{"degraded replication"}, findings(&replica), "%v", replica.Findings)
	assert.Equal(t, "replica", replica.Role)
}

// ACL users each missing one right: the audit names that right, and only
// that one.
func TestAuditRights(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, WithArgs(synced))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	admin := inspector(t, c)
	users := []struct {
		drop    []string
		want    []string
		missing string
	}{
		{nil, nil, ""},
		{[]string{"evalsha", "eval"}, []string{"degraded scripts"}, "evalsha"},
		{[]string{"zadd"}, []string{"degraded queue"}, "zadd"},
		{[]string{"zpopmin"}, []string{"degraded queue"}, "zpopmin"},
		{[]string{"channels"}, []string{"degraded channels"}, "publish"},
		{[]string{"publish"}, []string{"degraded channels"}, "publish"},
		{[]string{"time"}, []string{"degraded time"}, "time"},
		{[]string{"info"}, []string{"degraded info"}, "info"},
		{[]string{"set"}, []string{"unsafe commands"}, "set"},
	}
	for i, u := range users {
		name := "audit" + strconv.Itoa(i)
		setUser(t, ctx, admin[:1], aclLine(name, "pw"+name, "audit:", u.drop...))
		a := auditOf(t, clientsOf(t, &redis.Options{Username: name, Password: "pw" + name}, c.Addr(0)))[0]
		require.NoError(t, a.Err, "%v", u.drop)
		assert.Equal(t, u.want, findings(&a), "without %v: %v", u.drop, a.Findings)
		if u.missing != "" {
			assert.Contains(t, a.Missing, u.missing, "without %v", u.drop)
		} else {
			assert.Empty(t, a.Missing)
		}
		assert.Equal(t, name, a.User)
	}
	// The default user may run ACL DRYRUN: every right is checked there.
	full := auditOf(t, c.Clients(nil))[0]
	assert.Empty(t, findings(&full), "%v", full.Findings)
	assert.Empty(t, full.Missing)
}

// A node whose clock is off does not vote: the audit says so beforehand.
func TestAuditClock(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, WithClocks(), WithArgs(synced, synced, synced))
	require.NoError(t, c.SetClock(1, 60*time.Second))
	audits := auditOf(t, c.Clients(nil))
	for i, want := range [][]string{nil, {"degraded clock"}, nil} {
		assert.Equal(t, want, findings(&audits[i]), "node %d: %v", i, audits[i].Findings)
	}
	assert.InDelta(t, 60*time.Second, audits[1].ClockOffset, float64(2*time.Second))
	assert.Less(t, audits[0].ClockOffset.Abs(), time.Second)
	assert.Positive(t, audits[0].RoundTrip)
}

// A wrong password and a closed port show in Health from the first
// acquisition, while the node is not down; an address without a port is
// refused by New.
func TestAuditRefusedAndUnreachable(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 4, WithArgs(synced, synced, synced, synced))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	setUser(t, ctx, inspector(t, c)[3:], leastPrivilegeACL("locker", "right", "audit:"))
	closed, err := freePorts(1)
	require.NoError(t, err)
	clients := clientsOf(t, nil, c.Addr(0), c.Addr(1), c.Addr(2))
	clients = append(clients, clientsOf(t, &redis.Options{Username: "locker", Password: "wrong"}, c.Addr(3))...)
	clients = append(clients, clientsOf(t, nil, addr(closed[0]))...)
	rl, err := redlock.New(clients)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close(context.Background()) })
	for _, h := range rl.Health() {
		assert.Nil(t, h.Audit, "nothing is known before the first contact")
	}
	m := newMutex(t, rl, "audit:refused")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Unlock(ctx))
	// Health says what is wrong from the first contact, before any audit:
	// the refusal of the wrong password, and the closed port's node down.
	// (Lock returned at its quorum: the two nodes' calls may still end.)
	require.Eventually(t, func() bool {
		h := rl.Health()
		return h[3].Misconfigured != nil && h[4].Down
	}, 5*time.Second, 5*time.Millisecond, "node 3 refused, node 4 down")
	early := rl.Health()
	assert.ErrorContains(t, early[3].Misconfigured, "WRONGPASS")
	assert.False(t, early[3].Down, "a node that refuses still answers")
	assert.ErrorContains(t, early[4].Err, "connection refused")
	require.Eventually(t, func() bool { // each node's audit is recorded as it ends
		for _, h := range rl.Health() {
			if h.Audit == nil {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	h := rl.Health()
	assert.False(t, h[3].Down, "the node answers: it refuses")
	require.Error(t, h[3].Audit.Err)
	assert.ErrorIs(t, h[3].Audit.Err, redlock.ErrMisconfigured)
	assert.ErrorContains(t, h[3].Audit.Err, "WRONGPASS")
	assert.Equal(t, []string{"degraded refused"}, findings(h[3].Audit))
	require.Error(t, h[4].Audit.Err)
	assert.ErrorContains(t, h[4].Audit.Err, "connection refused")
	assert.Equal(t, []string{"degraded unreachable"}, findings(h[4].Audit))
	for i := range 3 {
		require.NotNil(t, h[i].Audit)
		assert.Empty(t, findings(h[i].Audit), "node %d", i)
	}

	noPort := clientsOf(t, nil, "localhost")
	_, err = redlock.New(append(clientsOf(t, nil, c.Addr(0)), noPort...))
	require.ErrorIs(t, err, redlock.ErrInvalidArgument)
	assert.ErrorContains(t, err, `"localhost" cannot be dialled`)
}

// The harm the eviction finding warns of: under memory pressure a
// volatile-lru node drops a held lock's key, and a second client takes the
// lock while the first still holds it. The audit had flagged the node.
func TestAuditEvictionLosesHeldLock(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, WithArgs(with("--maxmemory-policy", "volatile-lru")))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	admin := inspector(t, c)[0]
	first := newRedlock(t, c)
	m := newMutex(t, first, "audit:evicted", redlock.WithTTL(time.Minute))
	require.NoError(t, m.Lock(ctx))
	acquired := time.Now()

	// Memory is limited while the lock is held, a little above what the
	// node uses, then filled with keys that have a TTL, as a cache would.
	used, err := strconv.ParseInt(infoField(admin.Info(ctx, "memory").Val(), "used_memory"), 10, 64)
	require.NoError(t, err)
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+2<<20, 10)).Err())
	audit, err := first.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"unsafe eviction"}, findings(&audit[0]), "%v", audit[0].Findings)

	value := strings.Repeat("x", 1024)
	gone := false
	for batch := 0; batch < 200 && !gone; batch++ {
		pipe := admin.Pipeline()
		for k := range 500 {
			pipe.Set(ctx, fmt.Sprintf("cache:%d:%d", batch, k), value, time.Hour)
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
		gone = admin.Exists(ctx, "audit:evicted").Val() == 0
	}
	require.True(t, gone, "the lock's key was never evicted")
	select {
	case <-m.Done():
		t.Fatal("the first holder was told: the harm is that it is not")
	default:
	}
	second := newMutex(t, newRedlock(t, c), "audit:evicted", redlock.WithTTL(time.Minute))
	require.NoError(t, second.TryLock(ctx), "a second holder while the first holds the lock")
	assert.Less(t, time.Since(acquired), time.Minute, "within the first holder's validity")
}

// logCapture is a go-redis logger that keeps every line.
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (l *logCapture) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
}

// about returns the lines that mention address.
func (l *logCapture) about(address string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, address) {
			out = append(out, line)
		}
	}
	return out
}

// The library's own checks of a node that is down make the client log
// nothing: a node stopped for 10 s while locks are taken on the others
// gets no go-redis log line from the probes (the operations' own calls to
// it, before it is found down, are the caller's client's business: they
// end before the 10 s start).
// Not parallel: the go-redis logger is global.
func TestQuietProbes(t *testing.T) {
	c := startCluster(t, 3)
	logs := &logCapture{}
	redis.SetLogger(logs)
	t.Cleanup(func() { redis.SetLogger(stderrLogger{}) })
	rl := newRedlock(t, c)
	m := newMutex(t, rl, "audit:quiet", redlock.WithTTL(2*time.Second))
	require.NoError(t, m.Lock(t.Context()))
	require.NoError(t, m.Unlock(t.Context()))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, c.Stop(ctx, 2))
	// Found down by an operation's call, whose client goes on apart from
	// the call: up to 4 tries of the command (MaxRetries 3), each dialling
	// 5 times 100 ms apart and logging each time (a pipeline's tries log
	// twice): the window starts once a second passed without a line.
	require.Eventually(t, func() bool {
		_ = m.TryLock(ctx)
		_ = m.Unlock(ctx)
		return rl.Health()[2].Down
	}, 10*time.Second, 50*time.Millisecond)
	before := quietFor(logs, c.Addr(2), time.Second, 10*time.Second)
	end := time.Now().Add(10 * time.Second)
	locks := 0
	for time.Now().Before(end) {
		if m.TryLock(ctx) == nil {
			locks++
			require.NoError(t, m.Unlock(ctx))
		}
		time.Sleep(100 * time.Millisecond)
	}
	assert.Positive(t, locks)
	assert.True(t, rl.Health()[2].Down, "the node was probed as down all along")
	after := logs.about(c.Addr(2))
	t.Logf("go-redis log lines about the stopped node: %d before it was found down, %d in the 10 s it was probed",
		len(before), len(after)-len(before))
	assert.Empty(t, after[len(before):], "the probes of a down node make the client log")
	require.NoError(t, c.Restart(ctx, 2))
}

// quietFor waits until logs has had no new line about address for quiet,
// at most limit, and returns the lines about it so far.
func quietFor(logs *logCapture, address string, quiet, limit time.Duration) []string {
	end := time.Now().Add(limit)
	lines := logs.about(address)
	for since := time.Now(); time.Since(since) < quiet && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
		if now := logs.about(address); len(now) != len(lines) {
			lines, since = now, time.Now()
		}
	}
	return lines
}

// stderrLogger is go-redis' own default logger, put back after a test that
// captured the log.
type stderrLogger struct{}

func (stderrLogger) Printf(_ context.Context, format string, v ...any) {
	println("redis: " + fmt.Sprintf(format, v...))
}

// redlock doctor against a good set of nodes (exit 0) and a misconfigured
// one (exit 1), as a table and as JSON. Its output is logged (go test -v).
func TestDoctor(t *testing.T) {
	t.Parallel()
	good := startCluster(t, 3, WithArgs(synced, synced, synced))
	bad := startCluster(t, 3, WithArgs(with("--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru"),
		[]string{"--appendonly", "no"}, with("--appendfsync", "everysec")))
	closed, err := freePorts(1)
	require.NoError(t, err)
	bin := buildCLI(t)
	urls := func(addrs ...string) string {
		for i, a := range addrs {
			addrs[i] = "redis://" + a
		}
		return strings.Join(addrs, ",")
	}

	cli := cliRunner{bin: bin, nodes: urls(good.Addr(0), good.Addr(1), good.Addr(2))}
	code, out, stderr := cli.run(t, "doctor")
	t.Logf("redlock doctor (good set), exit %d:\n%s%s", code, out, stderr)
	assert.Equal(t, 0, code)
	assert.Equal(t, 3, strings.Count(out, " ok\n"), "every node ok")

	// Clients that delay a restarted node's votes need no persistence.
	cli = cliRunner{bin: bin, nodes: urls(bad.Addr(1))}
	code, out, stderr = cli.run(t, "doctor", "--restart-delay", "30s")
	t.Logf("redlock doctor --restart-delay 30s (appendonly no), exit %d:\n%s%s", code, out, stderr)
	assert.Equal(t, 0, code)
	assert.NotContains(t, out, "unsafe")

	cli = cliRunner{bin: bin, nodes: urls(bad.Addr(0), bad.Addr(1), bad.Addr(2), addr(closed[0]))}
	code, out, stderr = cli.run(t, "doctor")
	t.Logf("redlock doctor (misconfigured set), exit %d:\n%s%s", code, out, stderr)
	assert.Equal(t, 1, code)
	for _, want := range []string{
		bad.Addr(0) + ": unsafe eviction: maxmemory 104857600 with maxmemory-policy volatile-lru",
		bad.Addr(1) + ": unsafe persistence: appendonly no",
		bad.Addr(2) + ": unsafe persistence: appendfsync everysec",
		addr(closed[0]) + ": degraded unreachable",
	} {
		assert.Contains(t, out, want)
	}

	code, out, _ = cli.run(t, "doctor", "--json")
	assert.Equal(t, 1, code)
	var nodes []struct {
		Addr     string `json:"addr"`
		Verdict  string `json:"verdict"`
		Findings []struct {
			Severity, Code string
		} `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &nodes), out)
	require.Len(t, nodes, 4)
	verdicts := make([]string, len(nodes))
	for i, n := range nodes {
		verdicts[i] = n.Verdict
	}
	assert.Equal(t, []string{"unsafe", "unsafe", "unsafe", "unreachable"}, verdicts)
}
