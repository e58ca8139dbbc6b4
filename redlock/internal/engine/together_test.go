package engine_test

import (
	"context"
	"errors"
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

// outcomes gathers what each extension of a batch is told.
type outcomes struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	granted map[int][]int
	errs    map[int]error
	told    map[int]int
}

func newOutcomes() *outcomes {
	return &outcomes{granted: map[int][]int{}, errs: map[int]error{}, told: map[int]int{}}
}

// extension is extension k of a batch: op's, by cfg; its outcome goes to o.
func (o *outcomes) extension(ctx context.Context, k int, op *node.Extend, c engine.Lapse) engine.Extension {
	o.wg.Add(1)
	return engine.Extension{Ctx: ctx, Op: op, C: c, Done: func(granted []int, err error) {
		o.mu.Lock()
		o.granted[k], o.errs[k] = granted, err
		o.told[k]++
		o.mu.Unlock()
		o.wg.Done()
	}}
}

// The extensions a line's functions add go together once its every
// function ran: one request per node for them all, and each is told what
// its own round would have told it: its voters, the nodes that granted it
// after its round was decided, and, for a token no node holds, that the
// lock is lost.
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
		o := newOutcomes()
		at := time.Now().Add(time.Second)
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
			x := o.extension(t.Context(), k, op, lapse)
			e.Due(at, time.Second, func(b *engine.Batch) { b.Add(x) })
		}
		o.wg.Wait()
		time.Sleep(time.Second) // every late yes told
		synctest.Wait()
		for k := range locks {
			require.NoError(t, o.errs[k], "k%d", k)
			slices.Sort(o.granted[k])
			assert.Equal(t, []int{0, 1}, o.granted[k], "k%d's voters", k)
			assert.Equal(t, []int{2}, late[k], "k%d: node 2 granted after the quorum", k)
			assert.Greater(t, fs[2].Expiry(fmt.Sprint("k", k)), time.Now().Add(cfg.TTL/2), "k%d extended on node 2", k)
		}
		require.ErrorIs(t, o.errs[locks], engine.ErrNotHeld)
		require.ErrorIs(t, o.errs[locks], engine.ErrLockLost)
		assert.Contains(t, o.errs[locks].Error(), "the token is gone from")
		assert.Empty(t, late[locks], "nobody's token was granted nowhere")
		for k := range locks + 1 {
			assert.Equal(t, 1, o.told[k], "k%d told its outcome once", k)
		}
		assert.Equal(t, int64(1), cs[0].requests.Load()-before, "requests to node 0 for %d extensions", locks+1)
		assert.Equal(t, int64(1), cs[0].together.Load(), "requests to node 0 that carried many extensions")
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
		fs[1].Faults(func(n *nodetest.Fake) {
			n.Data["k1"] = nodetest.Entry{Value: "another", Expires: time.Now().Add(time.Minute)}
		})
		o := newOutcomes()
		var xs []engine.Extension
		for k := range 4 {
			op := &node.Extend{Key: fmt.Sprint("k", k), Token: fmt.Sprint("t", k), TTL: cfg.TTL}
			xs = append(xs, o.extension(t.Context(), k, op, engine.Lapse{Settings: &cfg}))
		}
		e.ExtendAll(xs)
		o.wg.Wait()
		for _, k := range []int{0, 2, 3} {
			assert.NoError(t, o.errs[k], "k%d: nodes 1 and 2 extended it", k)
		}
		require.Error(t, o.errs[1], "k1: refused by node 1, failed on node 0")
		assert.NotErrorIs(t, o.errs[1], engine.ErrNotHeld, "node 0 may hold it still, with node 2")
		assert.Contains(t, o.errs[1].Error(), "extension not confirmed")
		assert.Contains(t, o.errs[1].Error(), "node 0: ")
		assert.Contains(t, o.errs[1].Error(), "extended on 1 of 3 nodes")
		assert.Equal(t, int64(1), cs[1].together.Load(), "requests to node 1 that carried many extensions")
	})
}

// A round waits for a silent node as long as its extensions' node timeout
// says: extensions of another timeout go in a round of their own, and
// those that a quorum granted are told before the round's failed ones
// linger for the silent node; the soonest lost go first.
func TestExtensionsTogetherKeepTheirNodeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs, cs := newCountedEngine(t, 3)
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
		o := newOutcomes()
		var xs []engine.Extension
		start := time.Now()
		// k1 (long) is the soonest lost: its round, the first, takes the
		// long ones alone; the short ones, k6 among them, go next.
		for _, k := range []int{0, 2, 4, 5, 6, 7, 3, 1} {
			cfg, token := &short, fmt.Sprint("t", k)
			if k%2 == 1 {
				cfg = &long
			}
			if k == 6 {
				token = "nobody's" // refused: its error lingers for node 2
			}
			x := o.extension(t.Context(), k, &node.Extend{Key: fmt.Sprint("k", k), Token: token, TTL: cfg.TTL}, engine.Lapse{Settings: cfg})
			x.By = start.Add(time.Duration(k) * time.Second)
			if k%2 == 0 {
				x.By = x.By.Add(time.Minute) // after every long one
			}
			done := x.Done
			x.Done = func(granted []int, err error) {
				took[k] = time.Since(start)
				done(granted, err)
			}
			xs = append(xs, x)
		}
		before := cs[0].requests.Load()
		e.ExtendAll(xs)
		o.wg.Wait()
		for k := range 8 {
			if k == 6 {
				require.ErrorIs(t, o.errs[k], engine.ErrLockLost)
				assert.Less(t, took[k], 2*short.NodeTimeout, "k6 lingers for its own node timeout, not a long one")
				continue
			}
			require.NoError(t, o.errs[k], "k%d", k)
			assert.LessOrEqual(t, took[k], 40*time.Millisecond, "k%d: granted by nodes 0 and 1 in its round, whatever node 2 and k6 do", k)
			if k%2 == 0 {
				assert.Greater(t, took[k], took[1], "k%d, short, went in the round after the long ones'", k)
			}
		}
		assert.Equal(t, int64(2), cs[0].requests.Load()-before, "rounds")
	})
}

// An extension whose context ended before its round leaves without being
// sent.
func TestExtensionsTogetherLeaveWhenTheirContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs, cs := newCountedEngine(t, 3)
		short, long := settings(), settings()
		long.NodeTimeout = time.Second
		for k := range 2 {
			_, _, err := e.Acquire(t.Context(), lockSpec(&short, fmt.Sprint("k", k), fmt.Sprint("t", k), false))
			require.NoError(t, err)
		}
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = 50 * time.Millisecond })
		}
		before := cs[0].requests.Load()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		o := newOutcomes()
		start := time.Now()
		first := o.extension(t.Context(), 0, &node.Extend{Key: "k0", Token: "t0", TTL: short.TTL}, engine.Lapse{Settings: &long})
		second := o.extension(ctx, 1, &node.Extend{Key: "k1", Token: "t1", TTL: short.TTL}, engine.Lapse{Settings: &short})
		second.By = start.Add(time.Second) // after the first, in a round of its own: its context ends meanwhile
		e.ExtendAll([]engine.Extension{first, second})
		o.wg.Wait()
		require.NoError(t, o.errs[0])
		require.ErrorIs(t, o.errs[1], context.DeadlineExceeded)
		assert.Contains(t, o.errs[1].Error(), "not sent")
		assert.Equal(t, 50*time.Millisecond, time.Since(start), "the first round's time, and no second")
		synctest.Wait()
		assert.Equal(t, int64(1), cs[0].requests.Load()-before, "k1's extension was never sent")
	})
}

// failsOne is a node that answers every request of many extensions with
// its second extension failed, the others as the node answers them.
type failsOne struct{ node.Node }

var errOneKey = errors.New("the key's server is down")

func (f failsOne) Do(ctx context.Context, sendBy time.Time, op node.Op, done func(node.Reply)) {
	if _, ok := op.(*node.Extensions); !ok {
		f.Node.Do(ctx, sendBy, op, done)
		return
	}
	f.Node.Do(ctx, sendBy, op, func(rep node.Reply) {
		if each, ok := rep.Value.([]node.Reply); ok && rep.Err == nil {
			each = slices.Clone(each)
			each[1] = node.Reply{Err: errOneKey}
			rep.Value = each
		}
		done(rep)
	})
}

// An extension that one node failed, where the node answered the others
// of its request, is reported as failed there, to its own reporter only:
// as its own round would have reported it.
func TestExtensionsTogetherReportEachFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := nodetest.Fakes(3)
		nodes := nodetest.Nodes(fs)
		nodes[0] = failsOne{nodes[0]}
		e := engine.NewEngine(len(nodes), engine.Made(nodes), engine.Config{
			NodeErr: func(i int, err error) error { return fmt.Errorf("node %d: %w", i, err) }})
		t.Cleanup(func() { require.NoError(t, e.Close(context.Background())) })
		cfg := settings()
		var mu sync.Mutex
		reported := map[int][]string{}
		o := newOutcomes()
		var xs []engine.Extension
		for k := range 3 {
			_, _, err := e.Acquire(t.Context(), lockSpec(&cfg, fmt.Sprint("k", k), fmt.Sprint("t", k), false))
			require.NoError(t, err)
			report := func(_ context.Context, i int, err error, _ bool) {
				mu.Lock()
				reported[k] = append(reported[k], fmt.Sprintf("node %d: %v", i, err))
				mu.Unlock()
			}
			op := &node.Extend{Key: fmt.Sprint("k", k), Token: fmt.Sprint("t", k), TTL: cfg.TTL}
			xs = append(xs, o.extension(t.Context(), k, op, engine.Lapse{Settings: &cfg, Report: report}))
		}
		e.ExtendAll(xs)
		o.wg.Wait()
		synctest.Wait()
		for k := range 3 {
			require.NoError(t, o.errs[k], "k%d: nodes 1 and 2 extended it", k)
		}
		require.Len(t, reported[1], 1, "k1's failure on node 0")
		assert.Contains(t, reported[1][0], "node 0: ")
		assert.Contains(t, reported[1][0], errOneKey.Error())
		assert.Empty(t, reported[0], "k0 did not fail")
		assert.Empty(t, reported[2], "k2 did not fail")
	})
}
