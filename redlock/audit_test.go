package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/report"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

// safeFacts are a node that keeps its keys: no eviction, every write
// synced, no replica, its clock with this process's, every right.
func safeFacts() node.Facts {
	return node.Facts{Clocked: true, RoundTrip: time.Millisecond,
		Info: map[string]string{"redis_version": "7.0.15", "role": "master", "connected_slaves": "0",
			"maxmemory": "0", "maxmemory_policy": "noeviction", "aof_enabled": "1"},
		Config: map[string]string{"appendonly": "yes", "appendfsync": "always"},
		User:   "default", DryRun: true, Rights: map[string]error{}}
}

// codes are a's findings above info, as "severity code".
func codes(a *report.NodeAudit) []string {
	var out []string
	for _, f := range a.Findings {
		if f.Severity > report.SeverityInfo {
			out = append(out, f.Severity.String()+" "+f.Code)
		}
	}
	return out
}

// Each setting is judged where it applies, and only there.
func TestAuditJudge(t *testing.T) {
	nope := errors.New("NOPERM")
	cases := []struct {
		name   string
		change func(f *node.Facts)
		cfg    config
		want   []string
	}{
		{"safe", func(*node.Facts) {}, config{}, nil},
		{"volatile-lru", func(f *node.Facts) { f.Info["maxmemory"], f.Info["maxmemory_policy"] = "1000000", "volatile-lru" }, config{}, []string{"unsafe eviction"}},
		{"allkeys-lru", func(f *node.Facts) { f.Info["maxmemory"], f.Info["maxmemory_policy"] = "1000000", "allkeys-lru" }, config{}, []string{"unsafe eviction"}},
		{"noeviction with a limit", func(f *node.Facts) { f.Info["maxmemory"] = "1000000" }, config{}, nil},
		{"a policy with no limit", func(f *node.Facts) { f.Info["maxmemory_policy"] = "allkeys-lru" }, config{}, nil},
		{"no aof", func(f *node.Facts) { f.Info["aof_enabled"], f.Config["appendonly"] = "0", "no" }, config{}, []string{"unsafe persistence"}},
		{"no aof, restart delay", func(f *node.Facts) { f.Info["aof_enabled"], f.Config["appendonly"] = "0", "no" }, config{Settings: engine.Settings{Restart: time.Second}}, nil},
		{"everysec", func(f *node.Facts) { f.Config["appendfsync"] = "everysec" }, config{}, []string{"unsafe persistence"}},
		{"fsync no", func(f *node.Facts) { f.Config["appendfsync"] = "no" }, config{}, []string{"unsafe persistence"}},
		{"replica attached", func(f *node.Facts) { f.Info["connected_slaves"] = "1" }, config{}, []string{"unsafe replication"}},
		{"replica acknowledged", func(f *node.Facts) { f.Info["connected_slaves"] = "1" }, config{Settings: engine.Settings{Ack: node.Ack{Replicas: 1}}}, nil},
		{"too few replicas", func(*node.Facts) {}, config{Settings: engine.Settings{Ack: node.Ack{Replicas: 1}}}, []string{"degraded replication"}},
		{"a replica", func(f *node.Facts) { f.Info["role"] = "slave" }, config{}, []string{"degraded replication"}},
		{"clock off, guarded", func(f *node.Facts) { f.Offset = time.Minute }, config{Settings: engine.Settings{ClockTolerance: time.Second}}, []string{"degraded clock"}},
		{"clock off, unguarded", func(f *node.Facts) { f.Offset = time.Minute }, config{}, []string{"unsafe clock"}},
		{"clock near", func(f *node.Facts) { f.Offset = 500 * time.Millisecond }, config{Settings: engine.Settings{ClockTolerance: time.Second}}, nil},
		{"no scripts", func(f *node.Facts) { f.Rights["evalsha"] = nope }, config{}, []string{"degraded scripts"}},
		{"no queue", func(f *node.Facts) { f.Rights["zpopmin"] = nope }, config{}, []string{"degraded queue"}},
		{"no channels", func(f *node.Facts) { f.Rights["subscribe"] = nope }, config{}, []string{"degraded channels"}},
		{"no time", func(f *node.Facts) { f.Rights["time"], f.Clocked = nope, false }, config{}, []string{"degraded time"}},
		{"no info", func(f *node.Facts) { f.Rights["info"], f.Info = nope, nil }, config{}, []string{"degraded info"}},
		{"no set", func(f *node.Facts) { f.Rights["set"] = nope }, config{}, []string{"unsafe commands"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := safeFacts()
			c.change(&f)
			au := newAuditor(nil, 1, c.cfg.ClockTolerance)
			au.judgeBy(c.cfg)
			var a report.NodeAudit
			au.judge(&a, f)
			assert.Equal(t, c.want, codes(&a), "%v", a.Findings)
		})
	}
}

// What was read shows in the audit's fields, and the verdict is the worst
// finding.
func TestAuditFields(t *testing.T) {
	f := safeFacts()
	f.Info["valkey_version"], f.Info["maxmemory"], f.Info["maxmemory_policy"] = "8.0.1", "1024", "volatile-ttl"
	f.Offset, f.Caps = 3*time.Millisecond, node.Caps{Known: true, DelEx: true}
	f.Rights["zadd"] = errors.New("NOPERM")
	au := newAuditor(nil, 1, time.Second)
	var a report.NodeAudit
	au.judge(&a, f)
	assert.Equal(t, "valkey", a.Server)
	assert.Equal(t, "8.0.1", a.Version)
	assert.Equal(t, "master", a.Role)
	assert.Equal(t, int64(1024), a.MaxMemory)
	assert.Equal(t, "volatile-ttl", a.Policy)
	assert.True(t, a.AppendOnly)
	assert.Equal(t, "always", a.AppendFsync)
	assert.Equal(t, 3*time.Millisecond, a.ClockOffset)
	assert.Equal(t, []string{"scripts", "native", "transactions"}, a.Ways)
	assert.Equal(t, []string{"zadd"}, a.Missing)
	assert.Equal(t, report.SeverityUnsafe, a.Verdict())
	assert.Equal(t, report.SeverityUnsafe, a.Findings[0].Severity, "most severe first")
}

// finder is an report.AuditObserver that records what it is told.
type finder struct {
	recorder
	fmu   sync.Mutex
	found []string
}

func (f *finder) Found(i int, _ string, fd report.Finding) {
	f.fmu.Lock()
	defer f.fmu.Unlock()
	f.found = append(f.found, fmt.Sprintf("%d %s", i, fd.Code))
}

func (f *finder) told() []string {
	f.fmu.Lock()
	defer f.fmu.Unlock()
	return append([]string(nil), f.found...)
}

// The first acquisition audits every node in the background: Health shows
// each node's audit, a node that refused this client included, and the
// report.AuditObserver hears each finding once, however many audits find it.
func TestAuditAtFirstAcquisition(t *testing.T) {
	o := &finder{}
	r, fs := newFakeRedlock(t, 3, WithObserver(o))
	evicting := safeFacts()
	evicting.Info["maxmemory"], evicting.Info["maxmemory_policy"] = "1000", "volatile-lru"
	fs[1].Faults(func(n *nodetest.Fake) { n.Facts = &evicting })
	fs[2].Faults(func(n *nodetest.Fake) {
		n.Err, n.ErrOnly = replyError("WRONGPASS invalid username-password pair"), "audit"
	})
	for _, h := range r.Health() {
		assert.Nil(t, h.Audit, "no audit before the first acquisition")
	}
	m := newFakeMutex(t, r, "k")
	require.NoError(t, m.Lock(t.Context()))
	require.Eventually(t, func() bool {
		for _, h := range r.Health() {
			if h.Audit == nil {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond)
	h := r.Health()
	assert.Equal(t, report.SeverityInfo, h[0].Audit.Verdict(), "the server's version only")
	assert.Equal(t, report.SeverityUnsafe, h[1].Audit.Verdict())
	require.Error(t, h[2].Audit.Err)
	assert.ErrorIs(t, h[2].Audit.Err, ErrMisconfigured, "a wrong password shows from the first contact")
	assert.Equal(t, []string{"degraded refused"}, codes(h[2].Audit))
	assert.ElementsMatch(t, []string{"1 eviction", "2 refused"}, o.told())

	audits, err := r.Audit(t.Context())
	require.NoError(t, err)
	require.Len(t, audits, 3)
	assert.Equal(t, []string{"unsafe eviction"}, codes(&audits[1]))
	assert.ElementsMatch(t, []string{"1 eviction", "2 refused"}, o.told(), "told once")
	require.NoError(t, m.Unlock(t.Context()))
}

// Audit refuses a nil context, and after Close.
func TestAuditArguments(t *testing.T) {
	r, _ := newFakeRedlock(t, 1)
	_, err := r.Audit(nil) //nolint:staticcheck // a nil context is what is tested
	require.ErrorIs(t, err, ErrInvalidArgument)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = r.Audit(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, r.Close(t.Context()))
	_, err = r.Audit(t.Context())
	require.ErrorIs(t, err, ErrClosed)
}

// New refuses an address that cannot be dialled as written: a host
// without a port.
func TestNewRefusesAddressWithoutPort(t *testing.T) {
	good := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	bad := redis.NewClient(&redis.Options{Addr: "localhost"})
	unix := redis.NewClient(&redis.Options{Network: "unix", Addr: "/tmp/redis.sock"})
	t.Cleanup(func() { _, _, _ = good.Close(), bad.Close(), unix.Close() })
	_, err := New([]redis.UniversalClient{good, bad})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.ErrorContains(t, err, `client 1: address "localhost" cannot be dialled`)
	for _, addr := range []string{"localhost:", "localhost:0", "localhost:abc", "localhost:99999", "localhost:-1"} {
		bad := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = bad.Close() })
		_, err := New([]redis.UniversalClient{good, bad})
		require.ErrorIs(t, err, ErrInvalidArgument, addr)
		assert.ErrorContains(t, err, fmt.Sprintf("client 1: address %q cannot be dialled: port", addr))
	}
	r, err := New([]redis.UniversalClient{good, unix})
	require.NoError(t, err, "a unix socket has no port")
	require.NoError(t, r.Close(t.Context()))
}

// WithSafeQuorum refuses at once while no quorum of nodes is safe, naming
// them, and lets acquisitions through once a later audit finds the nodes
// fixed.
func TestSafeQuorum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3, WithSafeQuorum())
		evicting := safeFacts()
		evicting.Info["maxmemory"], evicting.Info["maxmemory_policy"] = "1000", "allkeys-lru"
		for _, f := range fs[1:] {
			f.Faults(func(n *nodetest.Fake) { n.Facts = &evicting })
		}
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		err := m.Lock(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.ErrorContains(t, err, "1 of 3 nodes safe by their last audit, quorum 2 (WithSafeQuorum): node 1 unsafe (eviction), node 2 unsafe (eviction)")
		assert.Zero(t, time.Since(start), "refused at once")
		assert.Zero(t, fs[0].Count("acquire"), "nothing asked")

		fs[2].Faults(func(n *nodetest.Fake) { n.Facts = nil }) // fixed
		require.ErrorIs(t, m.TryLock(t.Context()), ErrNotAcquired, "not audited again yet")
		time.Sleep(reauditEvery)
		require.ErrorIs(t, m.TryLock(t.Context()), ErrNotAcquired, "this one starts another audit")
		synctest.Wait()
		require.NoError(t, m.Lock(t.Context()), "a quorum is safe again")
		require.NoError(t, m.Unlock(t.Context()))

	})
}
