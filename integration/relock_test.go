package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
)

// A process that unlocks a name and at once locks it again must hold it on
// every live node. Unlock returns at the quorum, so its release may still be
// in flight to the slowest nodes when the next acquisition leaves; with two
// worker connections per node nothing orders the two there, and a SET NX
// that overtakes the release is refused by the old key, which the release
// then deletes: that node ends up without any key. Measured before any
// ordering (12d5f7f): 8 to 19 of 300 re-locks missed a node on five healthy
// nodes, whichever way the user re-locked.
//
// A user re-locks in three ways: on the same Mutex, on a fresh Mutex per
// use (a handler that calls NewMutex per request), and through Redlock.Do,
// which makes a fresh Mutex per call. Each is a subtest, on its own key,
// and reads the nodes both directly and through Inspect.

// relockRounds is how many re-locks the healthy-node test makes per way.
const relockRounds = 300

// relockSettle is how long after a re-lock the slower nodes get for its
// SET: TryLock returns at the quorum, so the fourth and fifth node's SET may
// still be in flight. On loopback they land within a millisecond or two; a
// node that holds nothing 200ms later never will.
const relockSettle = 200 * time.Millisecond

// relocker holds one lock name and re-locks it as a user would: Unlock,
// then TryLock at once, on the same Mutex or on a fresh one.
type relocker struct {
	rl    *redlock.Redlock
	name  string
	fresh bool // a new Mutex for every acquisition
	m     *redlock.Mutex
}

// newRelocker returns a relocker that already holds name (taken with Lock,
// so that the first round starts from a held lock like every other).
func newRelocker(t *testing.T, ctx context.Context, rl *redlock.Redlock, name string, fresh bool) *relocker {
	t.Helper()
	r := &relocker{rl: rl, name: name, fresh: fresh, m: newMutex(t, rl, name)}
	require.NoError(t, r.m.Lock(ctx), "first Lock of %q", name)
	t.Cleanup(func() { _ = r.m.Unlock(context.Background()) })
	return r
}

// relock releases the lock and at once tries to take it again. It returns
// TryLock's error; after a refusal it takes the lock with Lock, so that the
// next round starts from a held lock again.
func (r *relocker) relock(t *testing.T, ctx context.Context) error {
	t.Helper()
	require.NoError(t, r.m.Unlock(ctx), "Unlock of a held lock")
	if r.fresh {
		r.m = newMutex(t, r.rl, r.name)
	}
	err := r.m.TryLock(ctx)
	if err != nil {
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		lockCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		require.NoError(t, r.m.Lock(lockCtx), "Lock after a refused re-lock")
	}
	return err
}

// awaitOneHolder polls key on every node, for at most d, until all of them
// hold the same non-empty value (a plain lock's value is its token). It
// returns the last values read and whether they agreed.
func awaitOneHolder(t *testing.T, nodes []*redis.Client, key string, d time.Duration) ([]string, bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := values(t, nodes, key)
		if got[0] != "" && !slices.ContainsFunc(got, func(v string) bool { return v != got[0] }) {
			return got, true
		}
		if time.Now().After(deadline) {
			return got, false
		}
		time.Sleep(time.Millisecond)
	}
}

// checkHeldEverywhere counts a miss unless every node comes to hold the
// same token for name within relockSettle. When they do, Inspect must say
// the same: that token is the holder, on all five nodes. It reports whether
// the round was a miss.
func checkHeldEverywhere(t *testing.T, ctx context.Context, rl *redlock.Redlock, nodes []*redis.Client, name string, round int) (missed bool) {
	t.Helper()
	got, ok := awaitOneHolder(t, nodes, name, relockSettle)
	if !ok {
		t.Logf("round %d: after %v the nodes hold %q", round, relockSettle, got)
		return true
	}
	st, err := rl.Inspect(ctx, name)
	if !assert.NoError(t, err, "round %d: Inspect", round) { // assert: this also runs inside Do's fn
		return false
	}
	assert.Equal(t, len(nodes), st.Held, "round %d: nodes holding the top holder (Inspect: %+v)", round, st.Nodes)
	assert.Equal(t, got[0], st.Holder, "round %d: Inspect's holder, GET's value", round)
	return false
}

// TestUnlockThenLockHoldsEveryNode: on five healthy nodes, a TryLock right
// after Unlock succeeds and its key reaches every node, whichever way the
// user re-locks.
func TestUnlockThenLockHoldsEveryNode(t *testing.T) {
	c := startCluster(t, 5)
	nodes := inspector(t, c)
	rl := newRedlock(t, c)

	for _, tc := range []struct {
		name  string
		fresh bool
	}{{"same mutex", false}, {"fresh mutex", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			r := newRelocker(t, ctx, rl, "relock-every-node:"+t.Name(), tc.fresh)
			missed, refused := 0, 0
			for round := range relockRounds {
				if err := r.relock(t, ctx); err != nil {
					// One overtaken release is enough: the attempt finds
					// the old token there, takes it for a rival's and
					// gives way (the split-vote rule), seen once in 1,800
					// re-locks before any ordering.
					refused++
					t.Logf("round %d: re-lock refused: %v", round, err)
				}
				if checkHeldEverywhere(t, ctx, rl, nodes, r.name, round) {
					missed++
				}
			}
			assert.Zero(t, missed, "re-locks that left a node without the new key, of %d", relockRounds)
			assert.Zero(t, refused, "re-locks refused, of %d", relockRounds)
		})
	}

	// Do makes a fresh Mutex per call and returns once its Unlock reached a
	// quorum: back-to-back calls are re-locks too. Do's Lock retries, so a
	// refusal is hidden; a node left without the key is not.
	t.Run("do", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		name := "relock-every-node:" + t.Name()
		missed := 0
		for round := range relockRounds {
			require.NoError(t, rl.Do(ctx, name, func(context.Context) error {
				if checkHeldEverywhere(t, ctx, rl, nodes, name, round) {
					missed++
				}
				return nil
			}))
		}
		assert.Zero(t, missed, "Do calls whose lock missed a node, of %d", relockRounds)
	})
}

// TestUnlockThenLockWithPausedMinority: with two of five nodes paused, a
// TryLock right after this process's own Unlock needs every one of the three
// live nodes. Nothing else contends for the name: every re-lock must
// succeed. Nor may it wait for the paused nodes: whatever orders a re-lock
// behind the release must not hold it behind a release that is stuck on a
// paused node until the node timeout.
//
// This is a guard, not a probe of the overtaking itself: with three live
// nodes, Unlock's quorum is all of them, so when it returns nil every live
// node has already run the release and none is left to overtake. It passed
// on every version tried, the one without any ordering included, also with
// four goroutines locking other names through the same Redlock meanwhile.
func TestUnlockThenLockWithPausedMinority(t *testing.T) {
	c := startCluster(t, 5)
	const nodeTimeout = 100 * time.Millisecond // the default, spelled out: the tests below compare with it
	rl := newRedlock(t, c, redlock.WithNodeTimeout(nodeTimeout))
	paused := []int{1, 3}
	pauseNodes(t, c, paused...) // unpaused in cleanup, before rl is closed

	const rounds = 100
	for _, tc := range []struct {
		name  string
		fresh bool
	}{{"same mutex", false}, {"fresh mutex", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			r := newRelocker(t, ctx, rl, "relock-paused:"+t.Name(), tc.fresh)
			refused, silent := 0, 0
			took := make([]time.Duration, 0, rounds)
			for round := range rounds {
				start := time.Now()
				err := r.relock(t, ctx)
				took = append(took, time.Since(start))
				if err == nil {
					continue
				}
				refused++
				// A live node that did not answer in time is load, not
				// order; one that answered and refused held the old token.
				for _, ne := range redlock.NodeErrors(err) {
					if !slices.Contains(paused, ne.Index) {
						silent++
						break
					}
				}
				t.Logf("round %d: re-lock refused: %v", round, err)
			}
			slices.Sort(took)
			median, slowest := took[len(took)/2], took[len(took)-1]
			t.Logf("Unlock+TryLock: median %v, slowest %v", median, slowest)
			assert.Zero(t, refused, "re-locks refused with two of five nodes paused, of %d (%d with a live node silent)", rounds, silent)
			// The median, not the slowest: one GC pause under -race must
			// not fail the test, a wait on every re-lock must.
			assert.Less(t, median, nodeTimeout/2, "Unlock+TryLock waited for the paused nodes")
		})
	}
}
