// Package jitter is the library's waits: the one back-off (Backoff: the
// attempts of a lock, renewal after a failed extension, the probes of a
// down node, the identification of its server), the one sleep that a stop
// cuts short (Sleep), the one wait of a component's Close for what it
// runs (Wait), the one yield of the processor (Yield), and the random
// draws they and the retry after a split vote make (N). Draws come from
// math/rand/v2's unseeded source, except inside the simulator
// (internal/sim), which draws them from its seed so that a run can be
// replayed.
//
// It knows nothing of locks or nodes: its callers give it the bounds.
package jitter

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Backoff is the wait before a retry: before retry k (from 1), uniformly
// random in [Lo, min(Hi, Lo×2^(k-1))], so that callers that failed
// together do not try again together, and a failure that lasts is retried
// ever less often, up to Hi apart.
type Backoff struct{ Lo, Hi time.Duration }

// Delay is the wait before retry k.
func (b Backoff) Delay(k int) time.Duration {
	ceiling := b.Hi
	if k < 32 {
		if c := b.Lo << (k - 1); c > 0 && c < b.Hi {
			ceiling = c
		}
	}
	return b.Lo + N(ceiling-b.Lo+1)
}

// Sleep waits for d, or until done is closed (a stop); it reports whether
// d passed.
func Sleep(d time.Duration, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

var (
	mu     sync.Mutex
	seeded *rand.Rand
	// simulated is set while seeded is: see Yield.
	simulated atomic.Bool
)

// Yield gives the processor to the goroutines ready to run before the
// caller goes on: a node's worker yields before it takes its next batch,
// so that the callers its last round trip woke join it (see
// node.Redis.work). Inside the simulator it does nothing: which of the
// goroutines ready at one instant runs first is what no seed fixes, and a
// yield per batch would make a seed's replays part far more often.
func Yield() {
	if !simulated.Load() {
		runtime.Gosched()
	}
}

// N returns a random duration (or count) in [0, n); it panics if n <= 0,
// as rand.N does.
func N[T ~int64](n T) T {
	mu.Lock()
	r := seeded
	if r == nil {
		mu.Unlock()
		return rand.N(n)
	}
	defer mu.Unlock()
	return T(r.Int64N(int64(n)))
}

// Seed draws every later wait from seed, until the returned function is
// called. Only the simulator calls it: a process-wide source, for one run
// at a time.
func Seed(seed uint64) (restore func()) {
	mu.Lock()
	defer mu.Unlock()
	prev := seeded
	seeded = rand.New(rand.NewPCG(seed, 0x6a6974746572))
	simulated.Store(true)
	return func() {
		mu.Lock()
		defer mu.Unlock()
		seeded = prev
		simulated.Store(prev != nil)
	}
}
