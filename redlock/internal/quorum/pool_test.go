package quorum

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

// The probe intervals the facade's tests wait out (redlock/health_test.go):
// a change here must change them too.
func TestProbeBounds(t *testing.T) {
	assert.Equal(t, 200*time.Millisecond, probeMax)
	assert.Equal(t, 20*time.Millisecond, probeFirst)
}

// SlowestTrip follows the slowest node's round trip, smoothed over its
// replies, and leaves out a node that is down: it bounds how far apart
// the replies of one request to every node arrive (the handoff window of
// redlock/internal/turn waits that long beyond its own).
func TestSlowestTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fakes := []*nodetest.Fake{nodetest.New("a"), nodetest.New("b"), nodetest.New("c")}
		fakes[1].Delay = 10 * time.Millisecond
		fakes[2].Delay = 40 * time.Millisecond
		nodes := make([]node.Node, len(fakes))
		for i, f := range fakes {
			nodes[i] = f
		}
		p := NewPool(nodes, PoolConfig{Now: time.Now})
		defer func() { _ = p.Close(context.Background()) }()
		assert.Zero(t, p.SlowestTrip(), "no reply yet")
		ask := func() {
			rd := NewRound(t.Context(), p, time.Second, nil, p.Size())
			rd.SendAll(&node.Extend{Key: "k", Token: "t", TTL: time.Second}, nil, nil)
			require.NoError(t, rd.Gather(t.Context()))
		}
		ask()
		assert.Equal(t, 40*time.Millisecond, p.SlowestTrip(), "the first reply's round trip")
		fakes[2].Faults(func(f *nodetest.Fake) { f.Delay = 8 * time.Millisecond })
		ask()
		assert.Equal(t, 36*time.Millisecond, p.SlowestTrip(), "an eighth of the way to 8 ms")
		for range 40 {
			ask()
		}
		assert.Equal(t, 10*time.Millisecond, p.SlowestTrip(), "node 2 is faster than node 1 by now")
		p.states[1].mu.Lock()
		p.states[1].down = true
		p.states[1].mu.Unlock()
		assert.Less(t, p.SlowestTrip(), 10*time.Millisecond, "a node down is left out")
	})
}
