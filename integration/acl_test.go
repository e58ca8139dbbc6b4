package integration

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
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
	setUser := func(t *testing.T, args []any) {
		t.Helper()
		for _, a := range admin {
			require.NoError(t, a.Do(ctx, args...).Err(), "%v", args)
		}
	}
	for _, tier := range []struct {
		name string
		drop []string
		off  string // the feature every node reports off, "" for none
	}{
		{"full line", nil, ""},
		{"no queue", []string{"zadd", "zrem", "zpopmin"}, redlock.FeatureQueue},
		{"no zpopmin", []string{"zpopmin"}, ""},
		{"no info", []string{"info"}, redlock.FeatureIdentify},
		{"no channels", []string{"channels"}, ""},
		{"core only", []string{"zadd", "zrem", "zpopmin", "info", "channels", "publish", "subscribe", "unsubscribe"}, redlock.FeatureQueue},
	} {
		t.Run(tier.name, func(t *testing.T) {
			user := "u" + strings.ReplaceAll(tier.name, " ", "")
			setUser(t, aclLine(user, "pw", "locks:", tier.drop...))
			obs := &failures{}
			opts := []redlock.Option{redlock.WithObserver(obs), redlock.WithRetryDelay(10*time.Millisecond, 50*time.Millisecond)}
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
					assert.Empty(t, h.Off, "node %d", h.Index)
					continue
				}
				assert.Contains(t, h.Off, tier.off, "node %d", h.Index)
				assert.ErrorIs(t, h.Off[tier.off], redlock.ErrMisconfigured)
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
				assert.Contains(t, f.e.Error(), "off on this node", "no other failure: %v", f.e)
			}
		})
	}

	t.Run("no pexpire", func(t *testing.T) {
		setUser(t, aclLine("upexpire", "pw", "locks:", "pexpire"))
		rl := redlockOver(t, userClients(c, "upexpire", "pw"))
		m := newMutex(t, rl, "locks:upexpire", redlock.WithTTL(time.Minute))
		require.NoError(t, m.Lock(ctx), "the plain acquisition needs no PEXPIRE")
		err := m.Extend(ctx)
		require.ErrorIs(t, err, redlock.ErrMisconfigured)
		assert.NotErrorIs(t, err, redlock.ErrNotHeld)
		assert.NotErrorIs(t, err, redlock.ErrLockLost)
		assert.GreaterOrEqual(t, len(redlock.NodeErrors(err)), 2, "each node's own error: %v", err)
		assert.Contains(t, err.Error(), "can't run this command", "Redis' words for a command a script may not run")
		require.NoError(t, m.Unlock(ctx))
	})
	t.Run("no scripts", func(t *testing.T) {
		setUser(t, aclLine("uscripts", "pw", "locks:", "evalsha", "eval"))
		rl := redlockOver(t, userClients(c, "uscripts", "pw"))
		start := time.Now()
		err := newMutex(t, rl, "locks:uscripts").Lock(ctx)
		requireMisconfigured(t, err, time.Since(start), time.Second)
		assert.NotErrorIs(t, err, redlock.ErrNotHeld)
	})
}
