package redlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/report"
)

// A release or an extension that nodes refuse for good (a missing ACL
// permission) is their error, ErrMisconfigured: not ErrNotHeld, not
// ErrLockLost, and the lease is not ended by it.
func TestRefusedLapseIsMisconfigured(t *testing.T) {
	r, fs := newFakeRedlock(t, 3)
	m := newFakeMutex(t, r, "k", WithTTL(time.Minute))
	require.NoError(t, m.TryLock(t.Context()))
	for _, f := range fs[:2] {
		f.Faults(func(n *nodetest.Fake) { n.Err, n.ErrOnly = errNoPerm, "extend" })
	}
	err := m.Extend(t.Context())
	require.ErrorIs(t, err, ErrMisconfigured)
	assert.NotErrorIs(t, err, ErrNotHeld)
	assert.NotErrorIs(t, err, ErrLockLost)
	assert.Contains(t, err.Error(), "extension refused by 2 of 3 nodes")
	select {
	case <-m.Done():
		t.Fatal("a refused extension ended the lease")
	default:
	}

	for _, f := range fs[:2] {
		f.Faults(func(n *nodetest.Fake) { n.Err, n.ErrOnly = errNoPerm, "release" })
	}
	err = m.Unlock(t.Context())
	require.ErrorIs(t, err, ErrMisconfigured)
	assert.NotErrorIs(t, err, ErrNotHeld)
	assert.Len(t, report.NodeErrors(err), 2, "each node's own error")

	// One refusing node of three is a failed minority, as before.
	fs[1].Faults(func(n *nodetest.Fake) { n.Err = nil })
	other := newFakeMutex(t, r, "other")
	require.NoError(t, other.TryLock(t.Context()))
	require.NoError(t, other.Unlock(t.Context()))
}

// A node that refuses the waiters' queue turns the queue off there, once:
// Health says so, the Observer hears it once, and locks go on.
func TestQueueOffOnceInHealthAndObserver(t *testing.T) {
	rec := &recorder{}
	r, fs := newFakeRedlock(t, 3, WithObserver(rec), WithRetryDelay(time.Millisecond, 5*time.Millisecond))
	fs[2].Faults(func(n *nodetest.Fake) { n.Err, n.ErrOnly = errNoPerm, "queue" })
	holder := newFakeMutex(t, r, "k")
	waiter := newFakeMutex(t, r, "k")
	for range 3 {
		require.NoError(t, holder.Lock(t.Context()))
		done := make(chan error, 1)
		go func() { done <- waiter.Lock(t.Context()) }()
		time.Sleep(30 * time.Millisecond) // it waits, queued where it can be
		require.NoError(t, holder.Unlock(t.Context()))
		require.NoError(t, <-done)
		require.NoError(t, waiter.Unlock(t.Context()))
	}
	h := r.Health()
	require.Contains(t, h[2].FeaturesOff, report.FeatureQueue)
	assert.ErrorIs(t, h[2].FeaturesOff[report.FeatureQueue], ErrMisconfigured)
	assert.Nil(t, h[0].FeaturesOff)
	_, _, _, nodes := rec.snapshot()
	var reports []string
	for _, f := range nodes {
		reports = append(reports, f.err.Error())
	}
	assert.Len(t, reports, 1, "reported once: %v", reports)
	assert.Equal(t, 1, fs[2].Count("queue"), "no queue change sent after the refusal")
}

// The facade's constants spell out their values (go doc shows them), and
// are the internal packages' own.
func TestFacadeConstantsAreTheEngines(t *testing.T) {
	assert.Equal(t, engine.FeatureQueue, report.FeatureQueue)
	assert.Equal(t, engine.FeatureIdentify, report.FeatureIdentify)
	assert.Equal(t, engine.FeatureScripts, report.FeatureScripts)
	assert.Equal(t, engine.FeatureClock, report.FeatureClock)
}
