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

// Extensions made at once share their rounds' requests, and each is told
// what its own round would have told it: its voters, the nodes that
// granted it after its round was decided, and, for a token no node
// holds, that the lock is lost.
func TestExtensionsTogetherAnswerEachAsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := nodetest.Fakes(3)
		cs := make([]*counted, len(fs))
		nodes := make([]node.Node, len(fs))
		for i, n := range nodetest.Nodes(fs) {
			cs[i] = &counted{Node: n}
			nodes[i] = cs[i]
		}
		e := engine.NewEngine(len(nodes), engine.Made(nodes), engine.Config{
			NodeErr: func(i int, err error) error { return fmt.Errorf("node %d: %w", i, err) }})
		defer func() { require.NoError(t, e.Close(context.Background())) }()
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
		e, fs := newFakeEngine(t, 3)
		cfg := settings()
		for k := range 4 {
			_, _, err := e.Acquire(t.Context(), lockSpec(&cfg, fmt.Sprint("k", k), fmt.Sprint("t", k), false))
			require.NoError(t, err)
		}
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = node.ErrNodeTimeout })
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
	})
}
