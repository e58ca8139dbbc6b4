package integration

import (
	"context"
	"errors"
	"os"
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

// aclLine is the README's least-privilege ACL for user on keys starting
// with prefix, without the commands in drop; "channels" in drop leaves the
// user no channel at all (as Redis 7 gives a new user).
func aclLine(user, pass, prefix string, drop ...string) []any {
	args := []any{}
	for _, a := range leastPrivilegeACL(user, pass, prefix) {
		s, _ := a.(string)
		if slices.Contains(drop, strings.TrimPrefix(s, "+")) || s == "&redlock:*" && slices.Contains(drop, "channels") {
			continue
		}
		args = append(args, a)
	}
	return args
}

// setUser runs args, an ACL SETUSER command, on every admin client.
func setUser(t *testing.T, ctx context.Context, admin []*redis.Client, args []any) {
	t.Helper()
	for _, a := range admin {
		require.NoError(t, a.Do(ctx, args...).Err(), "%v", args)
	}
}

// aclTiers are the users of docs/DEPLOYMENTS.md's ACL tiers: the
// least-privilege line (which has no ZRANGE: a release that finds no key
// hands the lock over to no one; the full line, which has it, is
// TestSafetyACL's) without each optional permission (the waiters'
// queue, ZPOPMIN alone as an older library's line had it, INFO, TIME, the
// channels, PUBSUB NUMSUB), and the core alone.
var aclTiers = []struct {
	name string
	drop []string
	off  string // the feature every node reports off, "" for none
}{
	{"core and options", nil, ""},
	{"no queue", []string{"zadd", "zrem", "zpopmin"}, report.FeatureQueue},
	{"no zpopmin", []string{"zpopmin"}, ""},
	{"no info", []string{"info"}, report.FeatureIdentify},
	{"no time", []string{"time"}, report.FeatureClock},
	{"no channels", []string{"channels"}, ""},
	{"no numsub", []string{"pubsub|numsub"}, ""}, // releases name the waiter instead of handing over
	{"core only", []string{"zadd", "zrem", "zpopmin", "info", "channels", "publish", "subscribe", "unsubscribe", "pubsub|numsub"}, report.FeatureQueue},
}

// TestACLTiers runs the lock as users with the least-privilege line minus
// each optional permission: the waiters' queue (ZADD, ZREM, ZPOPMIN, or
// ZPOPMIN alone, the line of an older library), INFO, the channels. Each
// must lock, extend, renew, unlock and hand the lock to a waiter; a feature
// a node refuses is shown in Health and reported to the Observer once per
// node. A line without a core permission gets ErrMisconfigured, never
// ErrNotHeld or ErrLockLost.
func TestACLTiers(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	admin := inspector(t, c)
	ctx := timeout(t, 3*time.Minute)
	for _, tier := range aclTiers {
		t.Run(tier.name, func(t *testing.T) {
			user := "u" + strings.ReplaceAll(tier.name, " ", "")
			setUser(t, ctx, admin, aclLine(user, "pw", "locks:", tier.drop...))
			obs := &failures{}
			opts := []redlock.Option{redlock.WithObserver(obs), redlock.WithRetryDelay(10*time.Millisecond, 50*time.Millisecond),
				redlock.WithNodeTimeout(400 * time.Millisecond)} // below the TTL; a loaded machine is not what this test is about
			rl := redlockOver(t, userClients(c, user, "pw"), opts...)
			other := redlockOver(t, userClients(c, user, "pw"), opts...)
			name := "locks:" + user
			since := time.Now()

			m := newMutex(t, rl, name, redlock.WithTTL(600*time.Millisecond), redlock.WithRenewal())
			require.NoError(t, m.Lock(ctx))
			require.NoError(t, m.Extend(ctx))
			time.Sleep(time.Second) // renewed past its TTL
			require.NoError(t, m.Err(), "renewal")
			w := newMutex(t, other, name)
			waiter := lockInBackground(ctx, w)
			time.Sleep(200 * time.Millisecond) // it waits (queued where the user may)
			require.NoError(t, m.Unlock(ctx))
			r := await(t, waiter, 5*time.Second)
			require.NoError(t, r.err, "the waiter gets the lock")
			require.NoError(t, w.Unlock(ctx))

			// other's Lock waited (the queue) and both acquired (INFO).
			for _, h := range other.Health() {
				if tier.off == "" {
					assert.Empty(t, h.FeaturesOff, "node %d", h.Index)
					continue
				}
				assert.Contains(t, h.FeaturesOff, tier.off, "node %d", h.Index)
				assert.ErrorIs(t, h.FeaturesOff[tier.off], redlock.ErrMisconfigured)
			}
			if tier.off != "" {
				for i := range admin {
					var reports int
					for _, f := range obs.of(i, since) {
						if strings.Contains(f.e.Error(), tier.off+" off on this node") {
							reports++
						}
					}
					assert.LessOrEqual(t, reports, 2, "node %d: once per Redlock at most", i)
				}
			}
			for _, f := range obs.of(0, since) {
				if slow(f.e) {
					continue
				}
				assert.Contains(t, f.e.Error(), "off on this node", "no other failure: %v", f.e)
			}
		})
	}

	t.Run("no pexpire", func(t *testing.T) {
		setUser(t, ctx, admin, aclLine("upexpire", "pw", "locks:", "pexpire"))
		rl := redlockOver(t, userClients(c, "upexpire", "pw"))
		m := newMutex(t, rl, "locks:upexpire", redlock.WithTTL(time.Minute))
		require.NoError(t, m.Lock(ctx), "the plain acquisition needs no PEXPIRE")
		err := m.Extend(ctx)
		require.ErrorIs(t, err, redlock.ErrMisconfigured)
		assert.NotErrorIs(t, err, redlock.ErrNotHeld)
		assert.NotErrorIs(t, err, redlock.ErrLockLost)
		assert.GreaterOrEqual(t, len(report.NodeErrors(err)), 2, "each node's own error: %v", err)
		assert.Contains(t, err.Error(), "can't run this command", "Redis' words for a command a script may not run")
		require.NoError(t, m.Unlock(ctx))
	})
	t.Run("no scripts", func(t *testing.T) {
		setUser(t, ctx, admin, aclLine("uscripts", "pw", "locks:", "evalsha", "eval"))
		// The nodes switch to speaking without scripts: the grant is a
		// plain SET, which the line allows, but the release needs WATCH,
		// MULTI and EXEC, which it does not (the line for such nodes is
		// in docs/DEPLOYMENTS.md, "Nodes without scripts").
		rl := redlockOver(t, userClients(c, "uscripts", "pw"))
		m := newMutex(t, rl, "locks:uscripts")
		require.NoError(t, m.Lock(ctx))
		start := time.Now()
		err := m.Unlock(ctx)
		require.ErrorIs(t, err, redlock.ErrMisconfigured)
		assert.Less(t, time.Since(start), time.Second, "refused at once")
		assert.NotErrorIs(t, err, redlock.ErrNotHeld)
		assert.ErrorContains(t, err, "'watch'")
	})
}

// fullACLLine returns the ACL line docs/DEPLOYMENTS.md says turns
// everything on: the one line of its ACL section that is a code block of
// its own and follows the words "turns everything on".
func fullACLLine(t *testing.T) string {
	t.Helper()
	return aclLineAfter(t, "this line turns everything on")
}

// fullLineUser creates the user of docs/DEPLOYMENTS.md's full ACL line on
// every node of admin, exactly as written there, and returns its name and
// password.
func fullLineUser(ctx context.Context, t *testing.T, admin []*redis.Client) (user, pass string) {
	t.Helper()
	fields := strings.Fields(fullACLLine(t))
	args := make([]any, len(fields))
	for i, f := range fields {
		args[i] = f
	}
	setUser(t, ctx, admin, args)
	return fields[2], strings.TrimPrefix(fields[4], ">")
}

// aclLineAfter returns the first code block of docs/DEPLOYMENTS.md after
// words, which must be one ACL line.
func aclLineAfter(t *testing.T, words string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/DEPLOYMENTS.md")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(doc), words)
	require.True(t, ok, "docs/DEPLOYMENTS.md no longer introduces its ACL line with the words %q", words)
	_, after, ok = strings.Cut(after, "```\n")
	require.True(t, ok)
	line, _, ok := strings.Cut(after, "\n```")
	require.True(t, ok)
	require.True(t, strings.HasPrefix(line, "ACL SETUSER ") && !strings.Contains(line, "\n"), "one ACL line: %q", line)
	return line
}

// TestACLFullLine creates the user of docs/DEPLOYMENTS.md's full ACL line,
// exactly as written there, and does everything the page says it allows
// as that user: plain, fenced, reentrant and multi-name locks with renewal
// and a waiter woken in turn, Do, DoRead and DoMulti, an RWMutex's readers
// and its writer waiting for them, a semaphore, Inspect of each kind,
// ForceUnlock of each kind, WithRestartDelay and WAIT. No node may report
// a failure, nor a feature off.
func TestACLFullLine(t *testing.T) {
	t.Parallel()
	line := fullACLLine(t)
	fields := strings.Fields(line)
	user, pass := fields[2], strings.TrimPrefix(fields[4], ">")
	require.True(t, strings.HasPrefix(fields[4], ">"), "the password is the fifth word: %q", line)
	var args []any
	for _, f := range fields {
		args = append(args, f)
	}

	c := startCluster(t, 3)
	admin := inspector(t, c)
	ctx := timeout(t, 3*time.Minute)
	for _, a := range admin {
		require.NoError(t, a.Do(ctx, args...).Err(), "%s", line)
	}
	since := time.Now()
	obs := &failures{}
	opts := []redlock.Option{redlock.WithObserver(obs), redlock.WithRetryDelay(10*time.Millisecond, 50*time.Millisecond),
		redlock.WithNodeTimeout(time.Second)} // a loaded machine is not what this test is about
	rl := redlockOver(t, userClients(c, user, pass), opts...)
	other := redlockOver(t, userClients(c, user, pass), opts...)

	t.Run("fenced lock, renewed, a waiter woken in turn", func(t *testing.T) {
		m := newMutex(t, rl, "locks:fenced", redlock.WithFencing(), redlock.WithTTL(1500*time.Millisecond), redlock.WithRenewal())
		require.NoError(t, m.Lock(ctx))
		first := m.Fence()
		assert.Positive(t, first)
		require.NoError(t, m.Extend(ctx))
		time.Sleep(2 * time.Second) // renewed past its TTL
		require.NoError(t, m.Err(), "renewal")
		s, err := rl.Inspect(ctx, "locks:fenced")
		require.NoError(t, err)
		assert.Equal(t, report.KindLock, s.Kind)
		assert.True(t, s.Locked())
		w := newMutex(t, other, "locks:fenced", redlock.WithFencing())
		waiter := lockInBackground(ctx, w)
		time.Sleep(200 * time.Millisecond) // it waits, queued
		require.NoError(t, m.Unlock(ctx))
		r := await(t, waiter, 5*time.Second)
		require.NoError(t, r.err, "the waiter gets the lock")
		assert.Greater(t, w.Fence(), first)
		require.NoError(t, redlock.SetFenced(ctx, admin[0], "locks:fenced:resource", "v", w.Fence()))
		require.NoError(t, w.Unlock(ctx))
	})
	t.Run("reentrant lock", func(t *testing.T) {
		m := newMutex(t, rl, "locks:reentrant", redlock.WithReentrant())
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.Lock(ctx))
		s, err := rl.Inspect(ctx, "locks:reentrant")
		require.NoError(t, err)
		assert.True(t, s.Locked())
		require.NoError(t, m.Unlock(ctx))
		require.NoError(t, m.Unlock(ctx))
	})
	t.Run("multi-name lock and Do", func(t *testing.T) {
		names := []string{"locks:{multi}:a", "locks:{multi}:b"}
		m, err := rl.NewMultiMutex(names)
		require.NoError(t, err)
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.Extend(ctx))
		require.NoError(t, m.Unlock(ctx))
		ran := 0
		run := func(context.Context) error { ran++; return nil }
		require.NoError(t, rl.DoMulti(ctx, names, run))
		require.NoError(t, rl.Do(ctx, "locks:do", run, redlock.WithFencing()))
		require.NoError(t, rl.DoRead(ctx, "locks:do", run))
		assert.Equal(t, 3, ran)
	})
	t.Run("readers and a waiting writer", func(t *testing.T) {
		r1, err := rl.NewRWMutex("locks:rw")
		require.NoError(t, err)
		r2, err := other.NewRWMutex("locks:rw")
		require.NoError(t, err)
		require.NoError(t, r1.RLock(ctx))
		require.NoError(t, r2.RLock(ctx))
		require.NoError(t, r1.Extend(ctx))
		s, err := rl.Inspect(ctx, "locks:rw")
		require.NoError(t, err)
		assert.Equal(t, report.KindReaders, s.Kind)
		w, err := other.NewRWMutex("locks:rw", redlock.WithFencing())
		require.NoError(t, err)
		wrote := make(chan error, 1)
		go func() { wrote <- w.Lock(ctx) }()
		time.Sleep(200 * time.Millisecond) // the writer waits, marked
		require.NoError(t, r1.RUnlock(ctx))
		require.NoError(t, r2.RUnlock(ctx))
		select {
		case err := <-wrote:
			require.NoError(t, err, "the writer gets the lock")
		case <-time.After(5 * time.Second):
			t.Fatal("the writer did not get the lock after the readers left")
		}
		assert.Positive(t, w.Fence())
		require.NoError(t, w.Unlock(ctx))

		require.NoError(t, r1.RLock(ctx))
		forced, err := rl.ForceUnlock(ctx, "locks:rw")
		require.NoError(t, err)
		assertForced(t, forced)
		assert.ErrorIs(t, r1.Extend(ctx), redlock.ErrLockLost, "forced free")
	})
	t.Run("semaphore", func(t *testing.T) {
		var sems []*redlock.Semaphore
		for range 3 {
			s, err := rl.NewSemaphore("locks:sem", 2, redlock.WithRenewal())
			require.NoError(t, err)
			sems = append(sems, s)
		}
		require.NoError(t, sems[0].Acquire(ctx))
		require.NoError(t, sems[1].Acquire(ctx))
		require.NoError(t, sems[0].Extend(ctx))
		assert.ErrorIs(t, sems[2].TryAcquire(ctx), redlock.ErrNotAcquired)
		s, err := rl.Inspect(ctx, "locks:sem")
		require.NoError(t, err)
		assert.Equal(t, report.KindSemaphore, s.Kind)
		require.NotNil(t, s.Semaphore)
		assert.Len(t, s.Semaphore.Holders, 2)
		require.NoError(t, sems[0].Release(ctx))
		require.NoError(t, sems[2].Acquire(ctx))
		forced, err := rl.ForceUnlock(ctx, "locks:sem")
		require.NoError(t, err)
		assertForced(t, forced)
		assert.ErrorIs(t, sems[1].Extend(ctx), redlock.ErrLockLost, "forced free")
		assert.ErrorIs(t, sems[2].Extend(ctx), redlock.ErrLockLost, "forced free")
	})
	t.Run("ForceUnlock of a lock", func(t *testing.T) {
		m := newMutex(t, rl, "locks:forced", redlock.WithTTL(time.Minute))
		require.NoError(t, m.Lock(ctx))
		forced, err := rl.ForceUnlock(ctx, "locks:forced")
		require.NoError(t, err)
		assertForced(t, forced)
		assert.ErrorIs(t, m.Extend(ctx), redlock.ErrLockLost)
	})
	t.Run("restart delay and WAIT", func(t *testing.T) {
		// The nodes have been up for seconds: the first attempts are refused
		// as recovering, until their uptime passes the delay (INFO in a script).
		delayed := redlockOver(t, userClients(c, user, pass), redlock.WithObserver(obs), redlock.WithNodeTimeout(time.Second))
		m := newMutex(t, delayed, "locks:delayed", redlock.WithTTL(2*time.Second), redlock.WithRestartDelay(2*time.Second))
		lockCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		require.NoError(t, m.Lock(lockCtx))
		require.NoError(t, m.Unlock(ctx))
		for _, u := range userClients(c, user, pass) {
			closeAfter(t, u)
			// No replica to wait for: WAIT 0 0 answers at once, if allowed.
			assert.NoError(t, u.Do(ctx, "wait", 0, 0).Err())
		}
	})

	for _, h := range append(rl.Health(), other.Health()...) {
		assert.Empty(t, h.FeaturesOff, "node %d: no feature off", h.Index)
	}
	noFailureBut(t, obs, len(admin), since, report.ErrNodeRecovering) // the restart delay's refusals
}

// noFailureBut fails t for each failure obs heard from one of nodes since
// then, other than except and a node too slow to answer (logged).
func noFailureBut(t *testing.T, obs *failures, nodes int, since time.Time, except error) {
	t.Helper()
	for i := range nodes {
		for _, f := range obs.of(i, since) {
			switch {
			case errors.Is(f.e, except):
			case slow(f.e):
				t.Logf("node %d was slow (a loaded machine): %v", i, f.e)
			default:
				t.Errorf("node %d failed under the full ACL line: %v", i, f.e)
			}
		}
	}
}

// assertForced checks that ForceUnlock freed the name on every node.
func assertForced(t *testing.T, forced []report.ForcedRelease) {
	t.Helper()
	for _, f := range forced {
		assert.NoError(t, f.Err)
	}
}

// slow reports whether a node failure is a node too slow to answer (the
// machine was loaded), which says nothing about permissions.
func slow(err error) bool {
	return errors.Is(err, report.ErrNodeTimeout) || errors.Is(err, report.ErrNodeDown)
}

// TestACLWrongPasswords runs the lock on five nodes whose clients, for two
// of them, give a wrong password and, for one, none: the first attempt
// fails, at once and as misconfigured, and each such node's error names
// the server's refusal (go-redis fails a new connection's AUTH with an
// error reply it does not put on a pipeline's commands: they read as
// answered with nothing, and Lock tried again).
func TestACLWrongPasswords(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 5)
	ctx := timeout(t, time.Minute)
	for _, a := range inspector(t, c) {
		require.NoError(t, a.Do(ctx, leastPrivilegeACL("locker", "pw", "locks:")...).Err())
		// The default user needs a password from now on: a client
		// without one is refused (NOAUTH).
		require.NoError(t, a.Do(ctx, "ACL", "SETUSER", "default", "resetpass", ">admin").Err())
	}
	clients := make([]redis.UniversalClient, c.Len())
	for i := range clients {
		opts := &redis.Options{Addr: c.Addr(i), Username: "locker", Password: "pw"}
		switch i {
		case 0, 1:
			opts.Password = "wrong"
		case 2:
			opts.Username, opts.Password = "", ""
		}
		clients[i] = redis.NewClient(opts) // closed by redlockOver
	}
	obs := &failures{}
	rl := redlockOver(t, clients, redlock.WithObserver(obs))
	start := time.Now()
	err := newMutex(t, rl, "locks:wrongpass").Lock(timeout(t, 10*time.Second))
	took := time.Since(start)
	t.Logf("Lock after %v: %v", took, err)
	requireMisconfigured(t, err, took, 3*time.Second)
	assert.ErrorContains(t, err, "misconfigured nodes: 3")
	for _, ne := range report.NodeErrors(err) {
		want := map[int]string{0: "WRONGPASS", 1: "WRONGPASS", 2: "NOAUTH"}[ne.Index]
		require.NotEmpty(t, want, "node %d did not fail: %v", ne.Index, ne)
		assert.ErrorIs(t, ne, redlock.ErrMisconfigured)
		assert.ErrorContains(t, ne, want)
	}
	for i := range 3 {
		for _, f := range obs.of(i, start) {
			assert.NotContains(t, f.e.Error(), "unexpected", "node %d: the refusal itself, from the first attempt", i)
		}
	}
}
