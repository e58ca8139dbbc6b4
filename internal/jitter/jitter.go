// Package jitter is where the library draws its random waits (back-offs,
// the retry after a split vote). They come from math/rand/v2's unseeded
// source, except inside the simulator (internal/sim), which draws them from
// its seed so that a run can be replayed.
package jitter

import (
	"math/rand/v2"
	"sync"
)

var (
	mu     sync.Mutex
	seeded *rand.Rand
)

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
	return func() {
		mu.Lock()
		defer mu.Unlock()
		seeded = prev
	}
}
