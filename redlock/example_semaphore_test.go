package redlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redlock-go/redlock/redlock"
)

// Two permits across five nodes: two workers hold one each, a third is
// refused until one of them releases.
func ExampleSemaphore() {
	addrs, stop := servers(5)
	defer stop()
	rl, closeAll := newRedlock(addrs)
	defer closeAll()
	ctx := context.Background()

	var workers []*redlock.Semaphore // one Semaphore value per holder
	for range 3 {
		s, err := rl.NewSemaphore("reports:workers", 2)
		if err != nil {
			panic(err)
		}
		workers = append(workers, s)
	}
	fmt.Println("quorum:", workers[0].Quorum())
	fmt.Println(workers[0].Acquire(ctx), workers[1].Acquire(ctx))
	fmt.Println(errors.Is(workers[2].TryAcquire(ctx), redlock.ErrNotAcquired))
	fmt.Println(workers[0].Release(ctx))
	fmt.Println(workers[2].TryAcquire(ctx))
	fmt.Println(workers[1].Release(ctx), workers[2].Release(ctx))
	// Output:
	// quorum: 4
	// <nil> <nil>
	// true
	// <nil>
	// <nil>
	// <nil> <nil>
}
