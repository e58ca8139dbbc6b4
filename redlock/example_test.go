package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// servers starts n in-process Redis stand-ins for the examples; real code
// passes clients of N independent Redis masters.
func servers(n int) (addrs []string, stop func()) {
	addrs, ms := startServers(n)
	return addrs, func() {
		for _, m := range ms {
			m.Close()
		}
	}
}

func startServers(n int) (addrs []string, ms []*miniredis.Miniredis) {
	for range n {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			panic(err)
		}
		ms = append(ms, m)
		addrs = append(addrs, m.Addr())
	}
	return addrs, ms
}

// newRedlock returns a Redlock with opts over one default client per
// address, and a function that closes them all.
func newRedlock(addrs []string, opts ...redlock.Option) (*redlock.Redlock, func()) {
	var clients []redis.UniversalClient
	for _, addr := range addrs {
		clients = append(clients, redis.NewClient(&redis.Options{Addr: addr}))
	}
	rl, err := redlock.New(clients, opts...)
	if err != nil {
		panic(err)
	}
	return rl, func() {
		_ = rl.Close(context.Background())
		for _, c := range clients {
			_ = c.Close()
		}
	}
}

func ExampleMutex_TryLock() {
	addrs, stop := servers(3)
	defer stop()
	rl, closeAll := newRedlock(addrs)
	defer closeAll()
	ctx := context.Background()

	first, _ := rl.NewMutex("report")
	second, _ := rl.NewMutex("report") // another holder, as another process would be
	fmt.Println("first:", first.TryLock(ctx))
	err := second.TryLock(ctx)
	fmt.Println("second acquired:", err == nil, "| ErrNotAcquired:", errors.Is(err, redlock.ErrNotAcquired))
	_ = first.Unlock(ctx)
	fmt.Println("second after unlock:", second.TryLock(ctx))
	_ = second.Unlock(ctx)
	// Output:
	// first: <nil>
	// second acquired: false | ErrNotAcquired: true
	// second after unlock: <nil>
}

func ExampleMutex_Extend() {
	addrs, stop := servers(3)
	defer stop()
	rl, closeAll := newRedlock(addrs)
	defer closeAll()
	ctx := context.Background()

	mu, _ := rl.NewMutex("batch", redlock.WithTTL(2*time.Second))
	_ = mu.Lock(ctx)
	for step := range 3 {
		// Before each step: is there time left? If not, extend.
		if time.Until(mu.Until()) < time.Second {
			if err := mu.Extend(ctx); err != nil {
				fmt.Println("lost the lock:", err)
				return
			}
		}
		fmt.Println("step", step)
	}
	_ = mu.Unlock(ctx)
	// Output:
	// step 0
	// step 1
	// step 2
}

func Example_nodeErrors() {
	addrs, ms := startServers(5)
	defer ms[0].Close()
	defer ms[2].Close()
	ms[1].Close() // a majority is down
	ms[3].Close()
	ms[4].Close()
	var clients []redis.UniversalClient
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		clients = append(clients, c)
	}
	rl, _ := redlock.New(clients)
	defer rl.Close(context.Background())
	mu, _ := rl.NewMutex("job")

	err := mu.TryLock(context.Background())
	fmt.Println(errors.Is(err, redlock.ErrNotAcquired))
	for _, ne := range report.NodeErrors(err) {
		fmt.Println("node", ne.Index, "failed")
	}
	// Unordered output:
	// true
	// node 1 failed
	// node 3 failed
	// node 4 failed
}

// A holder passes its fencing token with every write; the resource keeps
// the highest token it accepted and refuses lower ones. Here the first
// holder stalls past its validity, a second holder takes over and writes,
// and the first holder's late write is refused.
func ExampleSetFenced() {
	addrs, ms := startServers(6)
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	rl, done := newRedlock(addrs[:5]) // the lock's five nodes
	defer done()
	store := redis.NewClient(&redis.Options{Addr: addrs[5]}) // the resource
	defer store.Close()
	ctx := context.Background()

	first, _ := rl.NewMutex("invoice:7", redlock.WithFencing(), redlock.WithTTL(time.Second))
	if err := first.Lock(ctx); err != nil {
		panic(err)
	}
	stale := first.Fence()

	// ... the first holder stalls; its lock expires and another takes it.
	for _, m := range ms[:5] {
		m.FastForward(2 * time.Second) // the stand-ins' clocks move on
	}
	second, _ := rl.NewMutex("invoice:7", redlock.WithFencing())
	if err := second.TryLock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("tokens increase:", second.Fence() > stale)
	fmt.Println("second writes:", redlock.SetFenced(ctx, store, "invoice:7:total", "120", second.Fence()))
	err := redlock.SetFenced(ctx, store, "invoice:7:total", "100", stale)
	fmt.Println("first refused:", errors.Is(err, redlock.ErrStaleFence))
	total, _ := store.Get(ctx, "invoice:7:total").Result()
	fmt.Println("total:", total)
	_ = second.Unlock(ctx)
	// Output:
	// tokens increase: true
	// second writes: <nil>
	// first refused: true
	// total: 120
}

// Work run by Do reads the token of the acquisition it runs under.
func ExampleMutex_Fence() {
	addrs, stop := servers(5)
	defer stop()
	rl, done := newRedlock(addrs)
	defer done()
	ctx := context.Background()
	for range 2 {
		_ = rl.Do(ctx, "report", func(ctx context.Context) error {
			fmt.Println("fence:", redlock.MutexFrom(ctx).Fence())
			return nil
		}, redlock.WithFencing())
	}
	// Output:
	// fence: 1
	// fence: 2
}
