package integration

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// TestFaultMajorityPausedBeyondTTL: three of five nodes freeze for longer
// than the TTL while A holds a renewed lock. A learns it lost the lock
// (Done, ErrLockLost) before its validity ends; B, trying all along, gets
// the lock only after that validity ended.
func TestFaultMajorityPausedBeyondTTL(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	const ttl = time.Second
	opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(100 * time.Millisecond), redlock.WithFencing()}
	a, b := r.client(t, 0, opts...), r.client(t, 1, opts...)
	name := "paused:" + t.Name()
	ma, mb := a.mutex(t, name, redlock.WithRenewal()), b.mutex(t, name)
	lockCtx, cancelLock := context.WithCancel(ctx)
	defer cancelLock()
	require.NoError(t, ma.Lock(lockCtx))
	holdA := r.hist.acquired(a.id, ma)
	require.NoError(t, r.res.section(ctx, a.id, ma.Fence()))

	paused := []int{0, 1, 2}
	for _, i := range paused {
		require.NoError(t, r.c.Pause(ctx, i))
	}
	pausedAt := time.Now()
	unpaused := false
	unpause := func() {
		if !unpaused {
			unpaused = true
			for _, i := range paused {
				assert.NoError(t, r.c.Unpause(context.Background(), i))
			}
		}
	}
	t.Cleanup(unpause)

	bDone := make(chan *holding, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 6*time.Second)
		defer cancel()
		if assert.NoError(t, mb.Lock(ctx), "B never acquired") {
			bDone <- r.hist.acquired(b.id, mb)
			return
		}
		bDone <- nil
	}()

	select {
	case <-ma.Done():
	case <-time.After(3 * ttl):
		t.Fatal("A's Done did not close with a majority paused")
	}
	doneAt := time.Now()
	untilA := ma.Until()
	assert.ErrorIs(t, ma.Err(), redlock.ErrLockLost)
	assert.True(t, doneAt.Before(untilA), "Done closed %v after the validity ended", doneAt.Sub(untilA))
	hA := holdA.released()
	time.Sleep(time.Until(pausedAt.Add(ttl + 500*time.Millisecond))) // paused longer than the TTL
	unpause()

	hdB := <-bDone
	require.NotNil(t, hdB)
	assert.False(t, hdB.start.Before(untilA), "B acquired %v before A's validity ended", untilA.Sub(hdB.start))
	t.Logf("A lost the lock %v before its validity ended; B acquired %v after it", untilA.Sub(doneAt), hdB.start.Sub(untilA))
	assert.Greater(t, mb.Fence(), hA.fence)
	require.NoError(t, r.res.section(ctx, b.id, mb.Fence()))
	hdB.released()
	require.NoError(t, mb.Unlock(ctx))
	_ = ma.Unlock(ctx)
	requireSafe(t, r.res, true)
}

// uptime returns a node's INFO uptime_in_seconds.
func uptime(ctx context.Context, rc *redis.Client) (int, error) {
	info, err := rc.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`uptime_in_seconds:(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0, fmt.Errorf("no uptime in INFO: %q", info)
	}
	return strconv.Atoi(m[1])
}

// waitUptime polls node i until it reports at least secs of uptime.
func (r *rig) waitUptime(t *testing.T, i, secs int) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(secs+5) * time.Second)
	for {
		up, err := uptime(t.Context(), r.insp[i])
		if err == nil && up >= secs {
			return
		}
		require.True(t, time.Now().Before(deadline), "node %d: uptime %d (%v), want %d", i, up, err, secs)
		time.Sleep(50 * time.Millisecond)
	}
}

// sleepToFraction sleeps until the wall clock is frac past a whole second.
func sleepToFraction(frac time.Duration) {
	now := time.Now()
	next := now.Truncate(time.Second).Add(frac)
	if !next.After(now) {
		next = next.Add(time.Second)
	}
	time.Sleep(next.Sub(now))
}

// holdOnFirstThree makes client sc acquire m on nodes {0,1,2} only: nodes
// 3 and 4 hold another holder's leftover key, which expires within
// leftover. The fencing token still reaches all five nodes (the counter
// grows whether or not the lock is held there).
func (r *rig) holdOnFirstThree(t *testing.T, m *redlock.Mutex, leftover time.Duration) {
	t.Helper()
	ctx := t.Context()
	// The leftover value ranks below every token ("!" sorts before hex
	// digits), so that the split-vote rule never makes the attempt give way
	// to it when node 2's grant comes after nodes 3 and 4 refused.
	const left = "!leftover"
	for _, i := range []int{3, 4} {
		require.NoError(t, r.insp[i].Set(ctx, m.Name(), left, leftover).Err())
	}
	require.NoError(t, m.TryLock(ctx))
	time.Sleep(20 * time.Millisecond) // let every node answer
	v := r.values(t, m.Name())
	require.Equal(t, []string{v[0], v[0], v[0], left, left}, v)
	_, ok := r.waitValues(t, m.Name(), 2*leftover, func(v []string) bool { return v[3] == "" && v[4] == "" })
	require.True(t, ok, "the leftover keys did not expire")
}

// TestFaultRestartWithoutPersistence: node 2 of A's quorum {0,1,2}
// restarts without persistence and forgets A's key.
//
// Immediately back, it lets B form a second quorum {2,3,4} while A's
// validity lasts: the checker must report that overlap. Fencing still
// protects the resource: B's token is higher (A's token had reached every
// node), so A's late write is refused.
//
// With WithRestartDelay(TTL), the restarted node refuses (ErrNodeRecovering)
// until A's keys are gone: B gets the lock only after A's validity ended.
func TestFaultRestartWithoutPersistence(t *testing.T) {
	r := newRig(t)
	const ttl = 2 * time.Second
	base := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(200 * time.Millisecond), redlock.WithFencing()}

	t.Run("immediate", func(t *testing.T) { restartImmediate(t, r, base) })
	t.Run("delayed", func(t *testing.T) { restartDelayed(t, r, base, ttl) })
}

// restartImmediate is TestFaultRestartWithoutPersistence without a restart
// delay: the second quorum forms, and fencing refuses A's late write.
func restartImmediate(t *testing.T, r *rig, base []redlock.Option) {
	t.Helper()
	ctx := t.Context()
	a, b := r.client(t, 0, base...), r.client(t, 1, base...)
	name := "restart-now:" + t.Name()
	ma, mb := a.mutex(t, name), b.mutex(t, name)
	r.holdOnFirstThree(t, ma, 300*time.Millisecond)
	holdA := r.hist.acquired(a.id, ma)

	restart := time.Now()
	require.NoError(t, r.c.Kill(ctx, 2))
	require.NoError(t, r.c.Restart(ctx, 2))
	t.Logf("node 2 back after %v", time.Since(restart))
	lockCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	require.NoError(t, mb.Lock(lockCtx), "the documented hazard: a second quorum {2,3,4}")
	holdB := r.hist.acquired(b.id, mb)
	assert.True(t, time.Now().Before(ma.Until()), "A's validity had ended: the scenario proves nothing")
	hA, hB := holdA.released(), holdB.released()
	assert.Len(t, checkNoOverlap([]hold{hA, hB}), 1, "the checker missed two holders at once")

	assert.Greater(t, hB.fence, hA.fence, "B's token does not exceed A's")
	require.NoError(t, r.res.write(ctx, b.id, "b", hB.fence))
	err := r.res.write(ctx, a.id, "late a", hA.fence)
	require.ErrorIs(t, err, redlock.ErrStaleFence, "A's stale write was accepted")
	got, err := r.res.read(ctx, b.id)
	require.NoError(t, err)
	assert.Equal(t, "b", got)
	ops := r.hist.registerOps()
	assert.Equal(t, porcupine.Ok, checkRegister(ops))
	assert.Empty(t, staleAccepted(ops))
	require.NoError(t, mb.Unlock(ctx))
	_ = ma.Unlock(ctx) // its quorum is gone: ErrNotHeld
}

// restartDelayed is TestFaultRestartWithoutPersistence with a restart
// delay of ttl: B gets the lock only once A's validity ended.
func restartDelayed(t *testing.T, r *rig, base []redlock.Option, ttl time.Duration) {
	t.Helper()
	ctx := t.Context()
	opts := append(slices.Clone(base), redlock.WithRestartDelay(ttl))
	// The nodes refuse until they have been up for the delay: node 2
	// has just restarted, and the cluster is young.
	for i := range lockNodes {
		r.waitUptime(t, i, int(ttl/time.Second)+1)
	}
	a, b := r.client(t, 0, opts...), r.client(t, 1, opts...)
	name := "restart-delayed:" + t.Name()
	ma, mb := a.mutex(t, name), b.mutex(t, name)
	// probe is a lock that only node 2 can decide (0 and 1 hold a
	// foreign key): B acquires it as soon as node 2 grants again.
	probe := b.mutex(t, name+":probe")
	for _, i := range []int{0, 1} {
		require.NoError(t, r.insp[i].Set(ctx, probe.Name(), "foreign", time.Minute).Err())
	}
	r.holdOnFirstThree(t, ma, 300*time.Millisecond)
	holdA := r.hist.acquired(a.id, ma)
	untilA := ma.Until()

	require.NoError(t, r.c.Kill(ctx, 2))
	// Redis counts uptime_in_seconds from its start and now, both
	// truncated to whole wall-clock seconds, so it reads up to one
	// second more than has passed. Starting node 2 at .3 of a second
	// (it is up well before the next one) makes that error at least
	// .3s: a delay that ignores it shows below.
	sleepToFraction(300 * time.Millisecond)
	restart := time.Now() // node 2's process starts after this
	require.NoError(t, r.c.Restart(ctx, 2))
	t.Logf("node 2 back after %v", time.Since(restart))
	var (
		recovering bool
		holdB      *holding
		served     time.Time // when node 2 first granted the probe
	)
	noteRecovering := func(err error) { recovering = recovering || recoveringNode(err, 2) }
	deadline := restart.Add(ttl + 3*time.Second)
	for (holdB == nil || served.IsZero()) && time.Now().Before(deadline) {
		if holdB == nil {
			err := mb.TryLock(ctx)
			if err == nil {
				holdB = r.hist.acquired(b.id, mb)
			} else {
				require.ErrorIs(t, err, redlock.ErrNotAcquired)
				noteRecovering(err)
			}
		}
		if served.IsZero() {
			err := probe.TryLock(ctx)
			if err == nil {
				served = time.Now()
				require.NoError(t, probe.Unlock(ctx))
			} else {
				require.ErrorIs(t, err, redlock.ErrNotAcquired)
				noteRecovering(err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NotNil(t, holdB, "B never acquired after A's validity ended")
	require.False(t, served.IsZero(), "node 2 never granted again")
	t.Logf("B acquired %v after A's validity ended; node 2 granted again %v after its start began",
		holdB.start.Sub(untilA), served.Sub(restart))
	assert.True(t, recovering, "node 2 never refused as recovering")
	assert.GreaterOrEqual(t, served.Sub(restart), ttl, "node 2 granted before the restart delay passed")
	hA := holdA.released()
	hB := holdB.released()
	assert.Empty(t, r.hist.describe(checkNoOverlap([]hold{hA, hB})), "two holders at once despite the restart delay")
	assert.Greater(t, hB.fence, hA.fence)
	// The loop waits for node 2 to grant again, up to three seconds past
	// the restart delay (Redis's uptime reads whole seconds): B's own
	// validity may have run out by then, and its Unlock then says so.
	unlockedOrRanOut(t, mb)
	_ = ma.Unlock(ctx)
}

// unlockedOrRanOut unlocks m, which must succeed while m's validity lasts;
// after it, the release may say the lock was not held.
func unlockedOrRanOut(t *testing.T, m *redlock.Mutex) {
	t.Helper()
	valid := time.Now().Before(m.Until())
	err := m.Unlock(t.Context())
	if valid {
		require.NoError(t, err)
		return
	}
	require.True(t, err == nil || notHeldOrUnconfirmed(err), "%v", err)
}

// TestFaultEarlyExpiry: a node's clock jumping ahead expires the key early
// there (PEXPIRE 1 stands in for the jump, which libfaketime cannot fake
// here).
//
// When A's key is on all five nodes, one, then two such nodes leave no
// quorum to anyone else: B acquires after A's release, never during.
//
// When A holds a bare quorum {0,1,2} (the other two nodes were taken when
// it acquired, as happens under contention), a single node losing the key
// lets B form a quorum {0,3,4} while A's validity lasts: the checker must
// report that overlap, and fencing still refuses A's late write.
func TestFaultEarlyExpiry(t *testing.T) {
	r := newRig(t)
	opts := []redlock.Option{redlock.WithTTL(2 * time.Second), redlock.WithNodeTimeout(200 * time.Millisecond), redlock.WithFencing()}

	t.Run("held everywhere", func(t *testing.T) {
		ctx := t.Context()
		a, b := r.client(t, 0, opts...), r.client(t, 1, opts...)
		name := "early-expiry:" + t.Name()
		ma, mb := a.mutex(t, name), b.mutex(t, name)
		require.NoError(t, ma.TryLock(ctx))
		holdA := r.hist.acquired(a.id, ma)
		_, ok := r.waitValues(t, name, time.Second, func(v []string) bool { return !slices.Contains(v, "") })
		require.True(t, ok, "A's SET did not reach every node")

		for _, i := range []int{0, 3} {
			require.NoError(t, r.insp[i].PExpire(ctx, name, time.Millisecond).Err())
			_, ok := r.waitValues(t, name, time.Second, func(v []string) bool { return v[i] == "" })
			require.True(t, ok)
			err := mb.TryLock(ctx)
			require.ErrorIs(t, err, redlock.ErrNotAcquired, "a quorum with node %d expired early", i)
		}
		require.NoError(t, r.res.section(ctx, a.id, ma.Fence()))

		bGot := make(chan *holding, 1)
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if assert.NoError(t, mb.Lock(ctx)) {
				bGot <- r.hist.acquired(b.id, mb)
				return
			}
			bGot <- nil
		}()
		time.Sleep(300 * time.Millisecond) // B waits meanwhile
		holdA.released()
		require.NoError(t, ma.Unlock(ctx))
		holdB := <-bGot
		require.NotNil(t, holdB)
		require.NoError(t, r.res.section(ctx, b.id, mb.Fence()))
		holdB.released()
		require.NoError(t, mb.Unlock(ctx))
		requireSafe(t, r.res, true)
	})

	t.Run("bare quorum", func(t *testing.T) {
		ctx := t.Context()
		a, b := r.client(t, 2, opts...), r.client(t, 3, opts...)
		name := "early-expiry-bare:" + t.Name()
		ma, mb := a.mutex(t, name), b.mutex(t, name)
		r.holdOnFirstThree(t, ma, 300*time.Millisecond)
		holdA := r.hist.acquired(a.id, ma)
		require.NoError(t, r.insp[0].PExpire(ctx, name, time.Millisecond).Err())
		lockCtx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		require.NoError(t, mb.Lock(lockCtx), "one node's early expiry: a second quorum {0,3,4}")
		holdB := r.hist.acquired(b.id, mb)
		assert.True(t, time.Now().Before(ma.Until()), "A's validity had ended: the scenario proves nothing")
		hA, hB := holdA.released(), holdB.released()
		assert.Len(t, checkNoOverlap([]hold{hA, hB}), 1, "the checker missed two holders at once")
		assert.Greater(t, hB.fence, hA.fence)
		require.NoError(t, r.res.write(ctx, b.id, "b", hB.fence))
		require.ErrorIs(t, r.res.write(ctx, a.id, "late a", hA.fence), redlock.ErrStaleFence)
		assert.Equal(t, porcupine.Ok, checkRegister(r.hist.registerOps()))
		require.NoError(t, mb.Unlock(ctx))
		_ = ma.Unlock(ctx)
	})
}

// TestFaultHolderPausedPastValidity: A holds a fenced lock without
// renewal and stalls (a GC pause, a frozen VM) past its validity. B takes
// the lock and writes; A wakes and writes with its old token: the resource
// refuses it. The register history passes porcupine, and would not had
// the stale write been accepted.
func TestFaultHolderPausedPastValidity(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	const ttl = 500 * time.Millisecond
	opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(100 * time.Millisecond), redlock.WithFencing()}
	a, b := r.client(t, 0, opts...), r.client(t, 1, opts...)
	name := "holder-paused:" + t.Name()
	ma, mb := a.mutex(t, name), b.mutex(t, name)
	require.NoError(t, ma.Lock(ctx))
	holdA := r.hist.acquired(a.id, ma)
	fenceA := ma.Fence()
	require.NoError(t, r.res.section(ctx, a.id, fenceA))

	time.Sleep(time.Until(ma.Until()) + 50*time.Millisecond) // A stalls
	select {
	case <-ma.Done():
		assert.ErrorIs(t, ma.Err(), redlock.ErrLockLost)
	default:
		t.Error("A's Done is open after its validity ended")
	}
	hA := holdA.released()

	lockCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	require.NoError(t, mb.Lock(lockCtx))
	holdB := r.hist.acquired(b.id, mb)
	assert.Greater(t, mb.Fence(), fenceA)
	require.NoError(t, r.res.section(ctx, b.id, mb.Fence()))

	err := r.res.write(ctx, a.id, "a, awake", fenceA) // A wakes, unaware
	require.ErrorIs(t, err, redlock.ErrStaleFence)
	got, err := r.res.read(ctx, b.id)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("client %d fence %d", b.id, mb.Fence()), got)
	hB := holdB.released()
	require.NoError(t, mb.Unlock(ctx))
	require.ErrorIs(t, ma.Unlock(ctx), redlock.ErrNotHeld)
	assert.Empty(t, checkNoOverlap([]hold{hA, hB}))
	requireSafe(t, r.res, true)

	// Had the resource accepted A's late write (and the read then returned
	// it), the checker would say so.
	ops := r.hist.registerOps()
	for i, op := range ops {
		in := op.Input.(registerInput)
		if in.write && in.value == "a, awake" {
			ops[i].Output = registerOutput{accepted: true}
		}
		if !in.write && i == len(ops)-1 {
			ops[i].Output = registerOutput{value: "a, awake"}
		}
	}
	assert.Equal(t, porcupine.Illegal, checkRegister(ops), "a stale write accepted passed the checker")
	assert.Len(t, staleAccepted(ops), 1)
}

// recoveringNode reports whether err says node i refused as recovering
// from a restart.
func recoveringNode(err error, i int) bool {
	for _, ne := range report.NodeErrors(err) {
		if ne.Index == i && errors.Is(ne, report.ErrNodeRecovering) {
			return true
		}
	}
	return false
}
