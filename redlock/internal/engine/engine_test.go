package engine_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

// These tests drive the engine at its own seam: one acquisition
// (Engine.Acquire with a spec) over fake nodes, without a primitive.

// settings are the engine's settings with the library's defaults.
func settings() engine.Settings {
	return engine.Settings{TTL: 10 * time.Second, NodeTimeout: 100 * time.Millisecond, DriftFactor: 0.01,
		DelayMin: 10 * time.Millisecond, DelayMax: 200 * time.Millisecond, Listen: true, ClockTolerance: quorum.DefaultClockTolerance}
}

// newFakeEngine returns an engine over n fresh fakes, closed when the
// test ends.
func newFakeEngine(t *testing.T, n int) (*engine.Engine, []*nodetest.Fake) {
	t.Helper()
	return newFakeEngineAt(t, n, nil)
}

// newFakeEngineAt is newFakeEngine reading the clock now (nil: time.Now).
func newFakeEngineAt(t *testing.T, n int, now func() time.Time) (*engine.Engine, []*nodetest.Fake) {
	t.Helper()
	fs := nodetest.Fakes(n)
	nodes := nodetest.Nodes(fs)
	e := engine.NewEngine(len(nodes), engine.Made(nodes), engine.Config{Tolerance: quorum.DefaultClockTolerance, Now: now,
		NodeErr: func(i int, err error) error { return fmt.Errorf("node %d: %w", i, err) }})
	t.Cleanup(func() {
		for _, f := range fs {
			f.Unhang()
		}
		require.NoError(t, e.Close(context.Background()))
	})
	return e, fs
}

// lockSpec is the spec of a plain lock's attempt of token on name.
func lockSpec(cfg *engine.Settings, name, token string, split bool) engine.Spec {
	return engine.Spec{Op: &node.Acquire{Key: name, Token: token, TTL: cfg.TTL}, Undo: &node.Release{Key: name, Token: token},
		Token: token, Settings: cfg, Split: split}
}

// A won attempt's validity runs from its start: start + ttl - drift,
// whatever the attempt cost.
func TestEngineAcquireGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs := newFakeEngine(t, 5)
		cfg := settings()
		fs[0].Faults(func(n *nodetest.Fake) { n.Delay = 30 * time.Millisecond })
		start := time.Now()
		g, _, err := e.Acquire(t.Context(), lockSpec(&cfg, "k", "t", true))
		require.NoError(t, err)
		assert.Equal(t, start, g.Start)
		assert.Equal(t, quorum.ValidUntil(start, cfg.TTL, cfg.DriftFactor), g.Until)
		assert.Zero(t, time.Since(start), "decided at the quorum, not at the slow node")
	})
}

// A plain count fails as soon as no quorum can grant, and the attempt is
// undone on the nodes that granted before it returns.
func TestEngineAcquirePlainCountUndoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs := newFakeEngine(t, 5)
		cfg := settings()
		for _, f := range fs[2:] {
			f.Set("k", "other", time.Minute)
			// The refusals come after both grants, so the decision has
			// seen them (replies without delay arrive in any order).
			f.Faults(func(n *nodetest.Fake) { n.Delay = time.Millisecond })
		}
		_, failed, err := e.Acquire(t.Context(), lockSpec(&cfg, "k", "t", false))
		require.ErrorIs(t, err, engine.ErrNotAcquired)
		assert.Equal(t, 2, failed.Granted)
		assert.False(t, failed.GaveWay, "a plain count gives way to no one")
		for i, f := range fs[:2] {
			_, held := f.Get("k")
			assert.False(t, held, "node %d still holds the failed attempt", i)
		}
	})
}

// With the split-vote rule, an attempt outranked by a competitor that
// holds as many nodes with a greater token gives way at once, without
// waiting for the silent node.
func TestEngineAcquireSplitGivesWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs := newFakeEngine(t, 5)
		cfg := settings()
		for _, f := range fs[2:4] {
			f.Set("k", "zzz", time.Minute) // ranks above "t"
		}
		fs[4].Faults(func(n *nodetest.Fake) { n.Delay = time.Second })
		start := time.Now()
		_, failed, err := e.Acquire(t.Context(), lockSpec(&cfg, "k", "t", true))
		require.ErrorIs(t, err, engine.ErrNotAcquired)
		assert.True(t, failed.GaveWay)
		assert.Less(t, time.Since(start), cfg.NodeTimeout, "decided before the node timeout")
		time.Sleep(2 * time.Second) // the slow node's grant, and its undo
		for i, f := range fs {
			v, _ := f.Get("k")
			assert.NotEqual(t, "t", v, "node %d keeps the attempt's token", i)
		}
	})
}

// The undo of a failed attempt goes to a node only after that node's
// acquire request answered (its gate): a node that refused is not
// released at all, and a node that granted late is released after its
// grant, never before it.
func TestEngineUndoFollowsTheReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs := newFakeEngine(t, 3)
		cfg := settings()
		fs[0].Set("k", "other", time.Minute)
		fs[1].Set("k", "other", time.Minute)
		fs[2].Faults(func(n *nodetest.Fake) { n.Delay = 50 * time.Millisecond })
		_, _, err := e.Acquire(t.Context(), lockSpec(&cfg, "k", "t", false))
		require.ErrorIs(t, err, engine.ErrNotAcquired)
		time.Sleep(time.Second)
		fs[2].Faults(func(n *nodetest.Fake) {
			assert.Equal(t, []string{"acquire", "release"}, n.Applied, "granted late, then undone")
		})
		for _, f := range fs[:2] {
			f.Faults(func(n *nodetest.Fake) { assert.Zero(t, n.Calls["release"], "a node that refused is not released") })
		}
	})
}

// A grant's validity runs from the votes' start, and no grant is made
// once none of it is left; with the clock guard on, it records who voted.
func TestEngineGrantedOnlyWithValidityLeft(t *testing.T) {
	now := time.Unix(1000, 0)
	e, _ := newFakeEngineAt(t, 3, func() time.Time { return now })
	cfg := settings()
	voters := func() []int { return []int{0, 2} }
	start := now.Add(-time.Second)
	g, ok := e.Granted(start, &cfg, voters)
	require.True(t, ok)
	assert.Equal(t, start, g.Start)
	assert.Equal(t, quorum.ValidUntil(start, cfg.TTL, cfg.DriftFactor), g.Until)
	if e.Guard != nil {
		assert.Equal(t, []int{0, 2}, g.Voters)
	}
	validity := g.Until.Sub(start) // TTL - drift
	_, ok = e.Granted(now.Add(-validity), &cfg, voters)
	assert.False(t, ok, "votes counted from a start whose validity has just run out")
	_, ok = e.Granted(now.Add(-validity+time.Millisecond), &cfg, voters)
	assert.True(t, ok, "a millisecond of it left")
}

// A failed attempt with a hand-over undo (a handed token's) hands back
// what it took, announced, when no competitor was seen on a quorum: the
// nodes it held go to their next waiter rather than lie free unannounced.
// Where a competitor holds a quorum, it is undone silently: that holder's
// release hands the lock over later. A waiter is queued on every node
// (a release no one waits for announces nothing).
func TestEngineHandOverOnlyAfterASplit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		holders []string // nodes 2, 3 and 4
		handed  bool
	}{
		{"split", []string{"a", "a", "b"}, true},
		{"won by another", []string{"a", "a", "a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, fs := newFakeEngine(t, 5)
				cfg := settings()
				for i, h := range tc.holders {
					fs[2+i].Set("k", h, time.Minute)
				}
				for _, f := range fs {
					f.Faults(func(n *nodetest.Fake) { n.Queues = map[string]map[string]int64{node.QueueKey("k"): {"next": 1}} })
				}
				s := lockSpec(&cfg, "k", "t", true)
				s.HandOver = &node.Release{Key: "k", Token: "t", Channel: node.ReleaseChannel("k"), QueueKey: node.QueueKey("k")}
				_, _, err := e.Acquire(t.Context(), s)
				require.ErrorIs(t, err, engine.ErrNotAcquired)
				synctest.Wait()
				for i, f := range fs[:2] {
					_, held := f.Get("k")
					assert.False(t, held, "node %d still holds the failed attempt", i)
					f.Faults(func(n *nodetest.Fake) {
						assert.Equal(t, tc.handed, n.Published > 0, "node %d: announced %d times", i, n.Published)
					})
				}
			})
		})
	}
}

// An attempt with a handed token that nodes refused because the holder's
// release had not reached them yet, and that those nodes then handed the
// lock over to while it was out, counts them as grants (Spec.Handed): it
// acquires where it would have undone its grants and waited. A handoff
// from a node that never refused (it granted, or did not answer) counts
// no more than its reply did, and too few handoffs leave the attempt
// failed, its undo covering the nodes handed over too.
func TestEngineCountsHandoffsDuringTheAttempt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		handed []int // nodes whose handoffs came during the attempt
		won    bool
	}{
		{"a quorum with the handoffs", []int{1, 2}, true},
		{"none", nil, false},
		{"too few", []int{1}, false},
		{"from a node that granted", []int{0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, fs := newFakeEngine(t, 5)
				cfg := settings()
				for _, f := range fs[1:] {
					f.Set("k", "holder", time.Minute)
				}
				handed := make(chan node.Handed, 5)
				for _, i := range tc.handed {
					handed <- node.Handed{Node: i, Token: "t", At: time.Now()}
				}
				s := lockSpec(&cfg, "k", "t", true)
				s.Handed = handed
				g, _, err := e.Acquire(t.Context(), s)
				synctest.Wait()
				if !tc.won {
					require.ErrorIs(t, err, engine.ErrNotAcquired)
					_, held := fs[0].Get("k")
					assert.False(t, held, "node 0 still holds the failed attempt")
					for _, i := range tc.handed {
						assert.Positive(t, fs[i].Count("release"), "node %d, handed over, was not undone", i)
					}
					return
				}
				require.NoError(t, err)
				assert.ElementsMatch(t, []int{0, 1, 2}, g.Voters)
				assert.Equal(t, quorum.ValidUntil(g.Start, cfg.TTL, cfg.DriftFactor), g.Until, "the validity counts from the attempt's start")
				assert.Empty(t, handed, "every handoff read")
			})
		})
	}
}

// The releaser's token (Spec.Released) does not count as a holder: the
// attempt waits for the nodes it holds, and their handoffs, arriving while
// the attempt is out, win it at once. Every node's reply takes 1 ms; the
// releaser holds nodes 1 to 3, whose handoffs come 5 ms in.
func TestEngineHandoffsWinTheAttemptWhenTheyCome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs := newFakeEngine(t, 5)
		cfg := settings()
		for i, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = time.Millisecond })
			if i > 0 && i < 4 {
				f.Set("k", "releaser", time.Minute)
			}
		}
		handed := make(chan node.Handed, 5)
		go func() {
			time.Sleep(5 * time.Millisecond)
			for _, i := range []int{1, 2} {
				fs[i].Set("k", "t", cfg.TTL)
				handed <- node.Handed{Node: i, Token: "t", Released: "releaser", At: time.Now()}
			}
		}()
		s := lockSpec(&cfg, "k", "t", true)
		s.Handed, s.Released, s.Reasks = handed, "releaser", quorum.MaxReasks
		start := time.Now()
		g, _, err := e.Acquire(t.Context(), s)
		require.NoError(t, err)
		assert.Equal(t, 5*time.Millisecond, time.Since(start), "won as the handoffs came")
		assert.ElementsMatch(t, []int{0, 1, 4}, g.Voters, "the free nodes and the first handoff")
	})
}
