package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/internal/lease"
	"github.com/redlock-go/redlock/redlock/internal/quorum"
)

// These tests drive a Holder at its own seam: leases taken from grants the
// engine made over fake nodes, without a primitive.

// plain is a plain lock's kind.
type plain struct{}

func (plain) Release(name string, l *lease.Lease) node.Op {
	return &node.Release{Key: name, Token: l.Token, Channel: node.ReleaseChannel(name)}
}

func (plain) Undo(name, token string) node.Op { return &node.Release{Key: name, Token: token} }

func (plain) Extend(name, token string, cfg *engine.Settings) node.Op {
	return &node.Extend{Key: name, Token: token, TTL: cfg.TTL}
}

// ends records the ends of leases a holder tells.
type ends struct {
	mu   sync.Mutex
	lost []bool
}

func (*ends) OpStart(ctx context.Context, _ lease.Call) context.Context { return ctx }
func (*ends) OpEnd(context.Context, lease.Call, error, bool, int)       {}
func (e *ends) LeaseEnd(_ string, _ time.Time, lost bool, _ error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lost = append(e.lost, lost)
}

func (e *ends) seen() []bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]bool(nil), e.lost...)
}

// holding returns a holder of name over n fakes whose lease of token was
// just granted by a quorum of them.
func holding(t *testing.T, n int, ttl time.Duration) (*lease.Holder, []*nodetest.Fake, *ends) {
	t.Helper()
	fs := nodetest.Fakes(n)
	e := engine.NewEngine(len(fs), engine.Made(nodetest.Nodes(fs)), engine.Config{Tolerance: quorum.DefaultClockTolerance, NodeErr: func(i int, err error) error { return fmt.Errorf("node %d: %w", i, err) }})
	t.Cleanup(func() { require.NoError(t, e.Close(context.Background())) })
	cfg := engine.Settings{TTL: ttl, NodeTimeout: 100 * time.Millisecond, DriftFactor: 0.01, ClockTolerance: quorum.DefaultClockTolerance}
	ev := &ends{}
	h := &lease.Holder{Engine: e, Name: "k", Settings: cfg, Events: ev, Kind: plain{}}
	g, _, err := e.Acquire(t.Context(), engine.Spec{Op: &node.Acquire{Key: "k", Token: "t", TTL: ttl},
		Undo: plain{}.Undo("k", "t"), Token: "t", Settings: &h.Settings, Split: true})
	require.NoError(t, err)
	h.Take(t.Context(), "t", "t", g)
	return h, fs, ev
}

// A release ends the lease with its cause, frees every node, tells the
// end once as no loss, and leaves nothing to release again.
func TestHolderRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, fs, ev := holding(t, 3, 10*time.Second)
		l, done := h.Current(), h.Done()
		require.True(t, l.Live())
		cause := fmt.Errorf("%w: unlocked", engine.ErrNotHeld)
		require.NoError(t, h.Release(t.Context(), cause))
		synctest.Wait()
		for i, f := range fs {
			_, held := f.Get("k")
			assert.False(t, held, "node %d", i)
		}
		select {
		case <-done:
		default:
			t.Fatal("the released lease is not done")
		}
		assert.ErrorIs(t, l.Err, cause)
		assert.False(t, h.Holding())
		assert.Equal(t, []bool{false}, ev.seen())
		assert.ErrorIs(t, h.Release(t.Context(), cause), engine.ErrNotHeld, "nothing left to release")
	})
}

// A lease that is neither extended nor released is lost a margin before
// its validity ends, and told as lost.
func TestHolderLeaseRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _, ev := holding(t, 3, time.Second)
		l, done := h.Current(), h.Done()
		until := h.Until()
		<-done
		assert.True(t, errors.Is(l.Err, engine.ErrLockLost), "%v", l.Err)
		assert.False(t, time.Now().After(until), "lost before the validity ends")
		assert.Equal(t, []bool{true}, ev.seen())
	})
}
