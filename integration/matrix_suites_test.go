package integration

import (
	"context"
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

// The server matrix's suites that have no test of their own elsewhere:
// each runs on the servers of one launcher (see TestServerMatrix).

// onEvery waits until key holds one value on every node, non-empty when
// held (a grant or a release reaches the last node after Lock or Unlock
// returned at a quorum), and returns it.
func onEvery(t *testing.T, admin []*redis.Client, key string, held bool) string {
	t.Helper()
	var got []string
	ok := assert.Eventually(t, func() bool {
		got = values(t, admin, key)
		return (got[0] != "") == held && slices.Equal(got, slices.Repeat(got[:1], len(got)))
	}, 5*time.Second, 5*time.Millisecond, "%s the same on every node, held %v", key, held)
	require.True(t, ok, "last seen: %q", got)
	return got[0]
}

// requireOffEverywhere waits until every node of rl shows feature off:
// what a node refused after a call returned at a quorum shows a little
// later.
func requireOffEverywhere(t *testing.T, rl *redlock.Redlock, feature string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, h := range rl.Health() {
			if _, off := h.FeaturesOff[feature]; !off {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "%s off on every node: %+v", feature, rl.Health())
}

// matrixLock: Lock writes one token on every node, which another Redlock
// cannot take and Inspect finds; Extend renews every node's TTL; Unlock deletes the key
// everywhere and a second Unlock finds it not held; Do runs its function.
func matrixLock(t *testing.T, s *Servers) {
	t.Helper()
	ctx := timeout(t, time.Minute)
	admin := inspector(t, s)
	rl, other := newRedlock(t, s), newRedlock(t, s)
	const name, ttl = "matrix:lock", 2 * time.Second
	m := newMutex(t, rl, name, redlock.WithTTL(ttl))
	require.NoError(t, m.Lock(ctx))
	token := onEvery(t, admin, name, true)
	require.ErrorIs(t, newMutex(t, other, name).TryLock(ctx), redlock.ErrNotAcquired, "held by another")
	st, err := other.Inspect(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, report.KindLock, st.Kind)
	assert.Equal(t, token, st.Holder)
	assert.Equal(t, []int{matrixNodes, matrixNodes/2 + 1}, []int{st.Held, st.Quorum}, "Inspect: held on every node, and the quorum")

	time.Sleep(ttl / 3)
	until := m.Until()
	require.NoError(t, m.Extend(ctx))
	assert.True(t, m.Until().After(until), "Extend moves the validity on")
	for i, a := range admin { // the last node's extension may land after Extend returned at a quorum
		assert.Eventually(t, func() bool { return a.PTTL(ctx, name).Val() > ttl*3/4 }, ttl/4, 5*time.Millisecond,
			"node %d: the TTL renewed", i)
	}

	require.NoError(t, m.Unlock(ctx))
	onEvery(t, admin, name, false)
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld, "a second Unlock")
	ran := false
	require.NoError(t, other.Do(ctx, name, func(context.Context) error {
		ran = true
		assert.NotEqual(t, token, onEvery(t, admin, name, true), "Do's own token")
		return nil
	}))
	assert.True(t, ran, "Do runs its function")
	onEvery(t, admin, name, false)
}

// matrixFullLine runs the plain lock's contended workload as the user of
// docs/DEPLOYMENTS.md's full ACL line: every command the library sends
// this server is one the line allows, the grant of a lock handed over to
// its caller included (beside scripts, where the server has SET ... NX
// GET, that grant re-arms the key by script, not in a transaction).
func matrixFullLine(t *testing.T, s *Servers) {
	t.Helper()
	user, pass := fullLineUser(timeout(t, time.Minute), t, inspector(t, s))
	safetyWorkload(t, allClients(s, &redis.Options{Username: user, Password: pass}), "locks:matrix:acl", plainKind)
}

// matrixWithoutScripts runs the Mutex's safety workload as a user refused
// scripts (+@all -@scripting), checks the way each node is spoken to
// against the table, and that the primitives that need scripts are
// refused at once, naming scripting, with nothing written.
func matrixWithoutScripts(t *testing.T, s *Servers, row serverRow) {
	t.Helper()
	noScriptsUser(t, s)
	users := allClients(s, &redis.Options{Username: "noscripts", Password: "pw"})
	for _, kind := range []lockKind{plainKind, lockKinds[1]} { // plain and fenced
		t.Run(kind.name, func(t *testing.T) { safetyWorkload(t, users, "matrix:noscripts/"+kind.name, kind) })
	}

	ctx := timeout(t, time.Minute)
	rl := redlockOver(t, users(0))
	requireSpokenWithoutScripts(ctx, t, rl, row, "NOPERM")
	audits, err := rl.Audit(ctx)
	require.NoError(t, err)
	for _, a := range audits {
		assert.Equal(t, ways(row.withoutScripts), a.Ways, "node %d: the ways Audit finds", a.Index)
	}

	sem, err := rl.NewSemaphore("matrix:noscripts:sem", 2)
	require.NoError(t, err)
	rw, err := rl.NewRWMutex("matrix:noscripts:rw")
	require.NoError(t, err)
	mm, err := rl.NewMultiMutex([]string{"{matrix:noscripts}:a", "{matrix:noscripts}:b"})
	require.NoError(t, err)
	for what, take := range map[string]func(context.Context) error{
		"Semaphore.Acquire": sem.Acquire, "RWMutex.RLock": rw.RLock, "RWMutex.Lock": rw.Lock, "MultiMutex.Lock": mm.Lock,
	} {
		start := time.Now()
		err := take(ctx)
		requireMisconfigured(t, err, time.Since(start), time.Second)
		assert.ErrorContains(t, err, "+@scripting", what)
	}
	for i, a := range inspector(t, s) {
		n, err := a.Exists(ctx, "matrix:noscripts:sem", "matrix:noscripts:sem:redlock:permits", "matrix:noscripts:rw",
			"matrix:noscripts:rw:redlock:writer", "{matrix:noscripts}:a", "{matrix:noscripts}:b").Result()
		require.NoError(t, err)
		assert.Zero(t, n, "node %d: nothing written by the refused primitives", i)
	}
}

// requireSpokenWithoutScripts checks that rl's nodes, which refuse
// scripts for cause, take a reentrant lock, extend and release it, and are
// then spoken to the way the table of servers says.
func requireSpokenWithoutScripts(ctx context.Context, t *testing.T, rl *redlock.Redlock, row serverRow, cause string) {
	t.Helper()
	m := newMutex(t, rl, "matrix:without:"+cause, redlock.WithReentrant())
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Extend(ctx))
	require.NoError(t, m.Unlock(ctx))
	// Lock, Extend and Unlock return at a quorum: the last node may
	// refuse its first script, and switch, after them.
	requireOffEverywhere(t, rl, report.FeatureScripts)
	for _, h := range rl.Health() {
		assert.Equal(t, row.withoutScripts, h.Speaks, "node %d: the way without scripts (the table's)", h.Index)
		require.Contains(t, h.FeaturesOff, report.FeatureScripts, "node %d", h.Index)
		assert.ErrorContains(t, h.FeaturesOff[report.FeatureScripts], cause, "node %d", h.Index)
	}
}

// matrixWithoutLua: a server whose Lua engine is a module (Valkey 9)
// runs without it once unloaded, and answers EVALSHA with NOSCRIPT and the
// EVAL that follows with "Could not find scripting engine": the Mutex
// works, spoken to as by a user refused scripts, under contention too, and
// the primitives that need scripts are refused at once. Servers whose Lua
// is built in have nothing to unload.
func matrixWithoutLua(t *testing.T, s *Servers, row serverRow) {
	t.Helper()
	ctx := timeout(t, time.Minute)
	admin := inspector(t, s)
	mods, err := admin[0].Do(ctx, "module", "list").Slice()
	require.NoError(t, err)
	hasLua := strings.Contains(fmt.Sprint(mods), "lua")
	require.Equal(t, strings.HasPrefix(row.launcher, "valkey-9"), hasLua, "%s lists its modules: %v", row.launcher, mods)
	if !hasLua {
		return
	}
	for i, a := range admin {
		require.NoError(t, a.Do(ctx, "module", "unload", "lua").Err(), "node %d", i)
		require.ErrorContains(t, a.Eval(ctx, "return 1", nil).Err(), "Could not find scripting engine", "node %d", i)
	}
	safetyWorkload(t, allClients(s, nil), "matrix:nolua", plainKind)
	t.Run("conformance", func(t *testing.T) { conformanceWithoutLua(t, s, row) })

	rl := redlockOver(t, s.Clients(nil))
	requireSpokenWithoutScripts(ctx, t, rl, row, "Could not find scripting engine")
	sem, err := rl.NewSemaphore("matrix:nolua:sem", 2)
	require.NoError(t, err)
	start := time.Now()
	err = sem.Acquire(ctx)
	requireMisconfigured(t, err, time.Since(start), time.Second)
	assert.ErrorContains(t, err, "refuses Lua scripts")
}

// matrixClock: the clock guard reads each node's TIME with its votes and
// while a lock is held (every second), with scripts and without; every
// node's clock is accepted (it is this machine's) and the audit finds it
// within a fraction of a second of the process's. A user refused TIME
// shows the guard off on every node: what the check would see if TIME
// failed on a server.
func matrixClock(t *testing.T, s *Servers) {
	t.Helper()
	noScriptsUser(t, s)
	ctx := timeout(t, time.Minute)
	for _, user := range []string{"", "noscripts"} {
		t.Run(map[string]string{"": "scripts", "noscripts": "without scripts"}[user], func(t *testing.T) {
			rl := redlockOver(t, s.Clients(&redis.Options{Username: user, Password: map[string]string{"": "", "noscripts": "pw"}[user]}))
			m := newMutex(t, rl, "matrix:clock:"+user, redlock.WithTTL(5*time.Second))
			require.NoError(t, m.Lock(ctx))
			time.Sleep(1500 * time.Millisecond) // the guard's watch reads TIME every second while held
			require.NoError(t, m.Extend(ctx))
			require.NoError(t, m.Unlock(ctx))
			for _, h := range rl.Health() {
				assert.NoError(t, h.Clock, "node %d votes", h.Index)
				assert.NotContains(t, h.FeaturesOff, report.FeatureClock, "node %d: its TIME is read", h.Index)
			}
			audits, err := rl.Audit(ctx)
			require.NoError(t, err)
			for _, a := range audits {
				assert.Positive(t, a.RoundTrip, "node %d: TIME read", a.Index)
				assert.Less(t, a.ClockOffset.Abs(), 250*time.Millisecond, "node %d: its clock is this machine's", a.Index)
				for _, f := range a.Findings {
					assert.NotContains(t, []string{"clock", "time"}, f.Code, "node %d: %v", a.Index, f)
				}
			}
		})
	}
	t.Run("TIME refused", func(t *testing.T) {
		for i, a := range inspector(t, s) {
			require.NoError(t, a.Do(ctx, "ACL", "SETUSER", "notime", "on", ">pw", "~*", "&*", "+@all", "-time").Err(), "node %d", i)
		}
		rl := redlockOver(t, s.Clients(&redis.Options{Username: "notime", Password: "pw"}))
		m := newMutex(t, rl, "matrix:clock:notime", redlock.WithTTL(5*time.Second))
		require.NoError(t, m.Lock(ctx))
		// Lock returns at a quorum: the last node's TIME may be refused
		// after it, or only when the watch reads it (every second).
		requireOffEverywhere(t, rl, report.FeatureClock)
		require.NoError(t, m.Unlock(ctx))
	})
}
