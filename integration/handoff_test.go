package integration

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestHandoffWithoutAttempt: on servers of their own, a release hands the
// lock over to the waiting Lock of another process, which takes it with
// no attempt: each node runs one script in the handoff, the release. A
// user refused PUBSUB NUMSUB hands nothing over: the release names the
// waiter, which makes its attempt (two scripts per node, or three where
// the attempt reached a node before the release did and the node was
// asked again).
func TestHandoffWithoutAttempt(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	admin := inspector(t, c)
	ctx := timeout(t, 2*time.Minute)
	for _, tc := range []struct {
		name          string
		drop          []string
		scripts, most int64
	}{
		{"handed over", nil, 1, 1},
		{"no numsub: named", []string{"pubsub|numsub"}, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := "handoff" + strconv.Itoa(len(tc.drop))
			setUser(t, ctx, admin, aclLine(user, "pw", "handoff:", tc.drop...))
			clients := func() []redis.UniversalClient { return userClients(c, user, "pw") }
			// The waiter counts the handoffs that come within a window
			// of the first (turn.handoffWindow): on a machine loaded by
			// the tests beside this one, an announcement may come later,
			// and the waiter then makes its attempt, which is what it
			// should do. Up to three hand-overs, the first with the
			// counts wanted passes; one that never hands over fails all.
			var counts []int64
			for round := range 3 {
				counts = handOver(t, ctx, admin, clients, "handoff:"+user+":"+strconv.Itoa(round), tc.scripts)
				if !slices.ContainsFunc(counts, func(n int64) bool { return n < tc.scripts || n > tc.most }) {
					return
				}
			}
			t.Errorf("scripts run on each node from the release to the waiter's Lock: %v, want %d to %d on each", counts, tc.scripts, tc.most)
		})
	}
}

// handOver takes name, starts a waiting Lock in another process, releases
// once the waiter is queued, and returns how many scripts each node ran
// from the release to the waiter's Lock, at least least on each.
func handOver(t *testing.T, ctx context.Context, admin []*redis.Client, clients func() []redis.UniversalClient, name string, least int64) []int64 {
	t.Helper()
	holder := newMutex(t, redlockOver(t, clients()), name)
	require.NoError(t, holder.Lock(ctx))
	waiter := lockInBackground(ctx, newMutex(t, redlockOver(t, clients()), name))
	awaitQueued(t, ctx, admin, name)
	for _, a := range admin {
		require.NoError(t, a.ConfigResetStat(ctx).Err())
	}
	require.NoError(t, holder.Unlock(ctx))
	require.NoError(t, await(t, waiter, 10*time.Second).err)
	// Lock returns at a quorum: a node's release or attempt may still be
	// on its way.
	for i, a := range admin {
		require.Eventually(t, func() bool { return scriptCalls(t, a) >= least }, 5*time.Second, 10*time.Millisecond, "node %d", i)
	}
	time.Sleep(100 * time.Millisecond) // nothing more comes
	counts := make([]int64, len(admin))
	for i, a := range admin {
		counts[i] = scriptCalls(t, a)
	}
	return counts
}

// scriptCalls is how many EVALSHA and EVAL calls a's server ran since its
// stats were reset.
func scriptCalls(t *testing.T, a *redis.Client) int64 {
	t.Helper()
	info, err := a.Info(t.Context(), "commandstats").Result()
	require.NoError(t, err)
	var n int64
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || name != "cmdstat_evalsha" && name != "cmdstat_eval" {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(calls, 10, 64)
		require.NoError(t, err)
		n += v
	}
	return n
}
