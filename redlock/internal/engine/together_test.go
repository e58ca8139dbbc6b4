package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/internal/engine"
)

// counted is a node that counts the requests it is sent, and those that
// carry many extensions.
type counted struct {
	node.Node
	requests, together atomic.Int64
}

func (c *counted) Do(ctx context.Context, sendBy time.Time, op node.Op, done func(node.Reply)) {
	c.requests.Add(1)
	if _, ok := op.(*node.Extensions); ok {
		c.together.Add(1)
	}
	c.Node.Do(ctx, sendBy, op, done)
}

// newCountedEngine is newFakeEngine with each fake counted.
func newCountedEngine(t *testing.T, n int) (*engine.Engine, []*nodetest.Fake, []*counted) {
	t.Helper()
	fs := nodetest.Fakes(n)
	cs := make([]*counted, len(fs))
	nodes := make([]node.Node, len(fs))
	for i, n := range nodetest.Nodes(fs) {
		cs[i] = &counted{Node: n}
		nodes[i] = cs[i]
	}
	e := engine.NewEngine(len(nodes), engine.Made(nodes), engine.Config{
		NodeErr: func(i int, err error) error { return fmt.Errorf("node %d: %w", i, err) }})
	t.Cleanup(func() {
		for _, f := range fs {
			f.Unhang()
		}
		require.NoError(t, e.Close(context.Background()))
	})
	return e, fs, cs
}

// Extensions made at once share their rounds' requests, and each is told
// what its own round would have told it: its voters, the nodes that
// granted it after its round was decided, and, for a token no node
// holds, that the lock is lost.
func TestExtensionsTogetherAnswerEachAsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs, cs := newCountedEngine(t, 3)
		cfg := settings()
		const locks = 20
		for k := range locks {
			_, _, err := e.Acquire(t.Context(), lockSpec(&cfg, fmt.Sprint("k", k), fmt.Sprint("t", k), false))
			require.NoError(t, err)
		}
		before := cs[0].requests.Load()
		fs[2].Faults(func(n *nodetest.Fake) { n.Delay = 50 * time.Millisecond }) // its yes comes after the quorum's
		var mu sync.Mutex
		late := map[int][]int{}
		granted := make([][]int, locks+1)
		errs := make([]error, locks+1)
		var wg sync.WaitGroup
		for k := range locks + 1 {
			token := fmt.Sprint("t", k)
			if k == locks {
				token = "nobody's" // held by no node: lost
			}
			op := &node.Extend{Key: fmt.Sprint("k", k), Token: token, TTL: cfg.TTL}
			lapse := engine.Lapse{Settings: &cfg, Late: func(i int) {
				mu.Lock()
				late[k] = append(late[k], i)
				mu.Unlock()
			}}
			wg.Go(func() { granted[k], errs[k] = e.ExtendTogether(t.Context(), op, lapse) })
		}
		wg.Wait()
		time.Sleep(time.Second) // every late yes told
		synctest.Wait()
		for k := range locks {
			require.NoError(t, errs[k], "k%d", k)
			slices.Sort(granted[k])
			assert.Equal(t, []int{0, 1}, granted[k], "k%d's voters", k)
			assert.Equal(t, []int{2}, late[k], "k%d: node 2 granted after the quorum", k)
			assert.Greater(t, fs[2].Expiry(fmt.Sprint("k", k)), time.Now().Add(cfg.TTL/2), "k%d extended on node 2", k)
		}
		require.ErrorIs(t, errs[locks], engine.ErrNotHeld)
		require.ErrorIs(t, errs[locks], engine.ErrLockLost)
		assert.Contains(t, errs[locks].Error(), "the token is gone from")
		assert.Empty(t, late[locks], "nobody's token was granted nowhere")
		sent, together := cs[0].requests.Load()-before, cs[0].together.Load()
		assert.Less(t, sent, int64(locks/2), "requests to node 0 for %d extensions", locks+1)
		assert.Positive(t, together, "requests to node 0 that carried many extensions")
	})
}

// A round of extensions together that a node fails counts the failure in
// each extension's tally, named in the error of those that no quorum
// granted; one refused where the others were granted fails alone, and
// not as "not held" while the failed node may hold it.
func TestExtensionsTogetherCountEachFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs, cs := newCountedEngine(t, 3)
		cfg := settings()
		for k := range 4 {
			_, _, err := e.Acquire(t.Context(), lockSpec(&cfg, fmt.Sprint("k", k), fmt.Sprint("t", k), false))
			require.NoError(t, err)
		}
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = node.ErrNodeTimeout })
		fs[2].Faults(func(n *nodetest.Fake) { n.Delay = 10 * time.Millisecond }) // the others gather while the first round is out
		fs[1].Faults(func(n *nodetest.Fake) {
			n.Data["k1"] = nodetest.Entry{Value: "another", Expires: time.Now().Add(time.Minute)}
		})
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for k := range 4 {
			op := &node.Extend{Key: fmt.Sprint("k", k), Token: fmt.Sprint("t", k), TTL: cfg.TTL}
			wg.Go(func() { _, errs[k] = e.ExtendTogether(t.Context(), op, engine.Lapse{Settings: &cfg}) })
		}
		wg.Wait()
		for _, k := range []int{0, 2, 3} {
			assert.NoError(t, errs[k], "k%d: nodes 1 and 2 extended it", k)
		}
		require.Error(t, errs[1], "k1: refused by node 1, failed on node 0")
		assert.NotErrorIs(t, errs[1], engine.ErrNotHeld, "node 0 may hold it still, with node 2")
		assert.Contains(t, errs[1].Error(), "extension not confirmed")
		assert.Contains(t, errs[1].Error(), "node 0: ")
		assert.Contains(t, errs[1].Error(), "extended on 1 of 3 nodes")
		assert.Positive(t, cs[1].together.Load(), "requests to node 1 that carried many extensions")
	})
}

// A round waits for a silent node as long as its extensions' node timeout
// says: extensions of another timeout wait for a round of their own, and
// those that a quorum granted return before the round's failed ones
// linger for the silent node.
func TestExtensionsTogetherKeepTheirNodeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs, _ := newCountedEngine(t, 3)
		short, long := settings(), settings()
		long.NodeTimeout = 5 * time.Second
		for k := range 8 {
			_, _, err := e.Acquire(t.Context(), lockSpec(&short, fmt.Sprint("k", k), fmt.Sprint("t", k), false))
			require.NoError(t, err)
		}
		for i, f := range fs {
			f.Faults(func(n *nodetest.Fake) {
				n.Delay = 10 * time.Millisecond
				if i == 2 {
					n.Hang = make(chan struct{})
				}
			})
		}
		took := make([]time.Duration, 8)
		errs := make([]error, 8)
		var wg sync.WaitGroup
		start := time.Now()
		// k1 (long) leads the first round; k3 (long) the next, which the
		// short ones, k6 among them, must not join.
		for _, k := range []int{1, 3, 0, 2, 4, 5, 6, 7} {
			cfg, token := &short, fmt.Sprint("t", k)
			if k%2 == 1 {
				cfg = &long
			}
			if k == 6 {
				token = "nobody's" // refused: its error lingers for node 2
			}
			op := &node.Extend{Key: fmt.Sprint("k", k), Token: token, TTL: cfg.TTL}
			wg.Go(func() {
				_, errs[k] = e.ExtendTogether(t.Context(), op, engine.Lapse{Settings: cfg})
				took[k] = time.Since(start)
			})
			synctest.Wait() // waiting, in this order
		}
		wg.Wait()
		for k := range 8 {
			if k == 6 {
				require.ErrorIs(t, errs[k], engine.ErrLockLost)
				assert.Less(t, took[k], 2*short.NodeTimeout, "k6 lingers for its own node timeout, not a long one")
				continue
			}
			require.NoError(t, errs[k], "k%d", k)
			assert.LessOrEqual(t, took[k], 30*time.Millisecond, "k%d: granted by nodes 0 and 1 in its round, whatever node 2 and k6 do", k)
		}
	})
}

// An extension whose context ends while it waits for a round leaves
// without being sent.
func TestExtensionsTogetherLeaveWhenTheirContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs, cs := newCountedEngine(t, 3)
		cfg := settings()
		for k := range 2 {
			_, _, err := e.Acquire(t.Context(), lockSpec(&cfg, fmt.Sprint("k", k), fmt.Sprint("t", k), false))
			require.NoError(t, err)
		}
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = 50 * time.Millisecond })
		}
		before := cs[0].requests.Load()
		first := make(chan error, 1)
		go func() {
			_, err := e.ExtendTogether(t.Context(), &node.Extend{Key: "k0", Token: "t0", TTL: cfg.TTL}, engine.Lapse{Settings: &cfg})
			first <- err
		}()
		synctest.Wait() // the first round is out
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := e.ExtendTogether(ctx, &node.Extend{Key: "k1", Token: "t1", TTL: cfg.TTL}, engine.Lapse{Settings: &cfg})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "not sent")
		assert.Equal(t, 10*time.Millisecond, time.Since(start), "left when its context ended")
		require.NoError(t, <-first)
		synctest.Wait()
		assert.Equal(t, int64(1), cs[0].requests.Load()-before, "k1's extension was never sent")
	})
}
