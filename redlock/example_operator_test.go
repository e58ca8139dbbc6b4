package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/redlock"
)

func ExampleRedlock_Inspect() {
	addrs, stop := servers(3)
	defer stop()
	rl, done := newRedlock(addrs)
	defer done()
	ctx := context.Background()

	mu, _ := rl.NewMutex("report:nightly", redlock.WithTTL(30*time.Second), redlock.WithFencing())
	if err := mu.Lock(ctx); err != nil {
		panic(err)
	}
	defer mu.Unlock(ctx) //nolint:errcheck // an example
	// Lock returns once a quorum has answered: give the last node's writes
	// a moment to land, so that every line below reads the same.
	time.Sleep(50 * time.Millisecond)

	s, err := rl.Inspect(ctx, "report:nightly")
	if err != nil {
		panic(err)
	}
	for _, n := range s.Nodes {
		fmt.Println(n.Held, n.Holder == s.Holder, n.TTL > 29*time.Second, n.Fence)
	}
	fmt.Printf("held on %d of %d nodes, quorum %d, locked: %v\n", s.Held, len(s.Nodes), s.Quorum, s.Locked())
	// Output:
	// true true true 1
	// true true true 1
	// true true true 1
	// held on 3 of 3 nodes, quorum 2, locked: true
}

func ExampleRedlock_ForceUnlock() {
	addrs, stop := servers(3)
	defer stop()
	rl, done := newRedlock(addrs)
	defer done()
	ctx := context.Background()

	stuck, _ := rl.NewMutex("deploy:shop", redlock.WithTTL(time.Hour))
	if err := stuck.Lock(ctx); err != nil {
		panic(err)
	}
	// The holder is stuck; an operator frees the lock.
	out, err := rl.ForceUnlock(ctx, "deploy:shop")
	if err != nil {
		panic(err)
	}
	// One result per node. Lock returned at the quorum, so the last node
	// may have taken the lock only after ForceUnlock asked it.
	deleted := 0
	for _, fr := range out {
		if fr.Err == nil && fr.Deleted {
			deleted++
		}
	}
	fmt.Println(len(out), deleted >= 2)
	// The stuck holder finds out at its next extension.
	fmt.Println(errors.Is(stuck.Extend(ctx), redlock.ErrLockLost))
	// Output:
	// 3 true
	// true
}

func ExampleMutex_LockWithin() {
	addrs, stop := servers(3)
	defer stop()
	rl, done := newRedlock(addrs)
	defer done()

	// ctx bounds the hold: the lock is renewed until Unlock or ctx ends.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mu, _ := rl.NewMutex("migrate", redlock.WithTTL(5*time.Second), redlock.WithRenewal())
	// Wait at most 5s for the lock, then hold it as long as the work takes.
	if err := mu.LockWithin(ctx, 5*time.Second); err != nil {
		// errors.Is(err, redlock.ErrNotAcquired); after the 5s,
		// errors.Is(err, context.DeadlineExceeded) too
		panic(err)
	}
	defer mu.Unlock(context.WithoutCancel(ctx)) //nolint:errcheck // an example

	other, _ := rl.NewMutex("migrate")
	err := other.LockWithin(ctx, 300*time.Millisecond)
	fmt.Println(errors.Is(err, redlock.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded))
	// Output:
	// true true
}
