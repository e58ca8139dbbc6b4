package integration

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
)

// resource is what the lock guards, on a Redis no fault touches: a
// read-sleep-write counter and a fenced register, each recorded in hist.
type resource struct {
	rc    *redis.Client
	key   string
	hist  *history
	sleep time.Duration // between the counter's read and write
}

func newResource(t *testing.T, addr, key string, hist *history) *resource {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	return &resource{rc: rc, key: key, hist: hist, sleep: 2 * time.Millisecond}
}

// increment reads the counter, sleeps, and writes it plus one: safe only
// while one holder at a time does it.
func (r *resource) increment(ctx context.Context) error {
	v, err := r.rc.Get(ctx, r.key+":counter").Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	time.Sleep(r.sleep)
	if err := r.rc.Set(ctx, r.key+":counter", v+1, 0).Err(); err != nil {
		return err
	}
	r.hist.mu.Lock()
	r.hist.sections++
	r.hist.mu.Unlock()
	return nil
}

// lostUpdates returns how many increments the counter lost.
func (r *resource) lostUpdates(ctx context.Context) (int, error) {
	v, err := r.rc.Get(ctx, r.key+":counter").Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	r.hist.mu.Lock()
	defer r.hist.mu.Unlock()
	return r.hist.sections - v, nil
}

// write is client's SetFenced of value with fence, recorded. It returns
// SetFenced's error.
func (r *resource) write(ctx context.Context, client int, value string, fence uint64) error {
	call := time.Now()
	err := redlock.SetFenced(ctx, r.rc, r.key, value, fence)
	ret := time.Now()
	out := registerOutput{accepted: err == nil}
	if err != nil && !errors.Is(err, redlock.ErrStaleFence) {
		out.unknown = true
	}
	r.hist.addOp(porcupine.Operation{ClientId: client, Input: registerInput{write: true, value: value, fence: fence},
		Call: r.hist.since(call), Output: out, Return: r.hist.since(ret)})
	return err
}

// read is client's GET of the register, recorded.
func (r *resource) read(ctx context.Context, client int) (string, error) {
	call := time.Now()
	v, err := r.rc.Get(ctx, r.key).Result()
	ret := time.Now()
	if errors.Is(err, redis.Nil) {
		v, err = "", nil
	}
	if err != nil {
		return "", err
	}
	r.hist.addOp(porcupine.Operation{ClientId: client, Input: registerInput{}, Call: r.hist.since(call),
		Output: registerOutput{value: v}, Return: r.hist.since(ret)})
	return v, nil
}

// section is one critical section as the scenarios run it: increment the
// counter, write client's mark to the register with the hold's token
// twice (a holder may write several times with one token), and read it
// back. It returns the first write error (ErrStaleFence when refused).
func (r *resource) section(ctx context.Context, client int, fence uint64) error {
	if err := r.increment(ctx); err != nil {
		return err
	}
	if fence == 0 {
		return nil
	}
	mark := "client " + strconv.Itoa(client) + " fence " + strconv.FormatUint(fence, 10)
	werr := r.write(ctx, client, mark+" (draft)", fence)
	if err := r.write(ctx, client, mark, fence); werr == nil {
		werr = err
	}
	if _, err := r.read(ctx, client); err != nil {
		return err
	}
	return werr
}

// verdict is every check of a history at once.
type verdict struct {
	overlaps   []string
	inversions []string
	lost       int
	stale      int
	register   porcupine.CheckResult
	holds      int
	ops        int
}

// verify runs every check on h and r.
func (r *resource) verify(ctx context.Context) (verdict, error) {
	h := r.hist
	holds := h.allHolds()
	ops := h.registerOps()
	lost, err := r.lostUpdates(ctx)
	if err != nil {
		return verdict{}, err
	}
	return verdict{
		overlaps:   h.describe(checkNoOverlap(holds)),
		inversions: h.describe(fenceInversions(holds)),
		lost:       lost,
		stale:      len(staleAccepted(ops)),
		register:   checkRegister(ops),
		holds:      len(holds),
		ops:        len(ops),
	}, nil
}

// requireSafe asserts every check: no overlap, no lost update, the
// register history linearizable with no stale write accepted and, when
// increasing is set, fencing tokens strictly increasing.
func requireSafe(t *testing.T, r *resource, increasing bool) verdict {
	t.Helper()
	v, err := r.verify(context.Background())
	require.NoError(t, err)
	assert.Empty(t, v.overlaps, "two holders at once")
	assert.Zero(t, v.lost, "lost updates on the guarded counter")
	assert.Zero(t, v.stale, "stale fenced writes accepted")
	assert.Equal(t, porcupine.Ok, v.register, "fenced register history")
	if increasing {
		assert.Empty(t, v.inversions, "fencing tokens did not increase")
	}
	t.Logf("history: %d holds, %d register operations, %d sections", v.holds, v.ops, r.hist.sections)
	return v
}

// The checker's own tests: no Redis needed.

func TestCheckNoOverlapDetects(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	assert.Empty(t, checkNoOverlap([]hold{{0, at(0), at(10), 1}, {1, at(10), at(20), 2}, {2, at(25), at(30), 3}}),
		"touching windows do not overlap")
	assert.Len(t, checkNoOverlap([]hold{{0, at(0), at(10), 1}, {1, at(9), at(20), 2}}), 1)
	// A long window overlaps every later one it covers, however many.
	long := []hold{{0, at(0), at(100), 1}}
	for i := range 8 {
		long = append(long, hold{1, at(10 + 10*i), at(15 + 10*i), 2})
	}
	assert.Len(t, checkNoOverlap(long), 8)
	assert.Len(t, checkNoOverlap([]hold{{1, at(9), at(20), 0}, {0, at(0), at(30), 0}, {2, at(25), at(40), 0}}), 2,
		"order of recording does not matter")
}

func TestFenceInversionsDetects(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	assert.Empty(t, fenceInversions([]hold{{0, at(0), at(1), 1}, {1, at(2), at(3), 0}, {1, at(4), at(5), 2}}))
	assert.Len(t, fenceInversions([]hold{{0, at(0), at(1), 2}, {1, at(2), at(3), 2}}), 1, "equal tokens")
	assert.Len(t, fenceInversions([]hold{{0, at(4), at(5), 1}, {1, at(0), at(3), 3}}), 1, "a later holder with a lower token")
}

// registerOp builds one register operation at [call, ret] ms.
func registerOp(client, call, ret int, in registerInput, out registerOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: int64(call) * 1e6, Output: out, Return: int64(ret) * 1e6}
}

func TestFencedRegisterModel(t *testing.T) {
	w := func(v string, f uint64) registerInput { return registerInput{write: true, value: v, fence: f} }
	rd := registerInput{}
	accepted, stale, unknown := registerOutput{accepted: true}, registerOutput{}, registerOutput{unknown: true}
	val := func(v string) registerOutput { return registerOutput{value: v} }

	good := []porcupine.Operation{
		registerOp(0, 0, 1, w("a", 1), accepted),
		registerOp(0, 1, 2, w("a2", 1), accepted), // the same holder writes twice
		registerOp(1, 3, 4, w("b", 2), accepted),
		registerOp(0, 5, 6, w("late a", 1), stale),
		registerOp(1, 7, 8, rd, val("b")),
	}
	assert.Equal(t, porcupine.Ok, checkRegister(good))
	assert.Empty(t, staleAccepted(good))

	// The same history, had the resource accepted the stale write.
	bad := slices.Clone(good)
	bad[3] = registerOp(0, 5, 6, w("late a", 1), accepted)
	assert.Equal(t, porcupine.Illegal, checkRegister(bad), "a stale write accepted")
	assert.Len(t, staleAccepted(bad), 1)

	// A current write refused is as wrong.
	refused := slices.Clone(good)
	refused[2] = registerOp(1, 3, 4, w("b", 2), stale)
	assert.Equal(t, porcupine.Illegal, checkRegister(refused), "a current write refused")

	// A read must see the last accepted write.
	assert.Equal(t, porcupine.Illegal, checkRegister([]porcupine.Operation{
		registerOp(0, 0, 1, w("a", 1), accepted), registerOp(1, 2, 3, rd, val("")),
	}))
	// Concurrent writes may be ordered either way.
	assert.Equal(t, porcupine.Ok, checkRegister([]porcupine.Operation{
		registerOp(0, 0, 10, w("a", 2), accepted),
		registerOp(1, 1, 9, w("b", 1), accepted), // linearized before a
		registerOp(1, 11, 12, rd, val("a")),
	}))
	// A write whose outcome is unknown may or may not have happened.
	assert.Equal(t, porcupine.Ok, checkRegister([]porcupine.Operation{
		registerOp(0, 0, 1, w("a", 1), unknown), registerOp(1, 2, 3, rd, val("a")),
	}))
	assert.Equal(t, porcupine.Ok, checkRegister([]porcupine.Operation{
		registerOp(0, 0, 1, w("a", 1), unknown), registerOp(1, 2, 3, rd, val("")),
	}))
}

// TestResourceChecksDetect runs the resource's own checks against an
// in-memory Redis: two increments without a lock lose one, and a stale
// SetFenced is refused and recorded as such.
func TestResourceChecksDetect(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := t.Context()
	r := newResource(t, mr.Addr(), "res", newHistory())
	r.sleep = 50 * time.Millisecond // both reads land before either write
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { assert.NoError(t, r.increment(ctx)) })
	}
	wg.Wait()
	lost, err := r.lostUpdates(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, lost, "two unguarded increments")

	require.NoError(t, r.write(ctx, 0, "a", 1))
	require.NoError(t, r.write(ctx, 1, "b", 2))
	require.ErrorIs(t, r.write(ctx, 0, "late a", 1), redlock.ErrStaleFence)
	v, err := r.read(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, "b", v)
	got, err := r.verify(ctx)
	require.NoError(t, err)
	assert.Equal(t, porcupine.Ok, got.register)
	assert.Zero(t, got.stale)
	assert.Equal(t, 1, got.lost)
}
