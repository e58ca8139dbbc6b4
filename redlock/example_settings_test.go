package redlock_test

// The code of docs/SETTINGS.md: settings chosen by use, each run by an
// example below (TestDocSnippets checks the copies).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlock"
)

// nightlyJob runs the night's report on one host of many: every host's cron
// starts it at about the same time, the first to take the lock runs it, and
// the others skip it.
func nightlyJob(ctx context.Context, rl *redlock.Redlock, report func(context.Context) error) error {
	err := rl.Do(ctx, "job:nightly-report", report,
		redlock.WithTries(1),             // one attempt: do not wait for the host that runs it
		redlock.WithMaxHold(2*time.Hour)) // a stuck run lets go 2 h (plus a TTL) after it began
	if errors.Is(err, redlock.ErrHeld) {
		return nil // another host holds the lock on a quorum: it runs the report
	}
	return err
}

func Example_cronJob() {
	addrs, stop := servers(3)
	defer stop()
	hostA, closeA := newRedlock(addrs)
	defer closeA()
	hostB, closeB := newRedlock(addrs)
	defer closeB()
	ctx := context.Background()
	err := nightlyJob(ctx, hostA, func(ctx context.Context) error {
		fmt.Println("host A runs the report")
		// Host B's cron fires while A runs it.
		return nightlyJob(ctx, hostB, func(context.Context) error {
			fmt.Println("host B runs the report too")
			return nil
		})
	})
	fmt.Println(err)
	// Output:
	// host A runs the report
	// <nil>
}

// reindex runs a job of unknown length, from minutes to hours, under a lock
// renewed while it runs.
func reindex(ctx context.Context, rl *redlock.Redlock, job func(context.Context) error) error {
	return rl.Do(ctx, "job:reindex", job,
		redlock.WithTTL(30*time.Second),  // covers a pause or a few failed extensions (renewed every TTL/3)
		redlock.WithMaxHold(6*time.Hour)) // a stuck job cannot keep it forever
	// job must stop when its ctx ends: the lock was lost (context.Cause wraps
	// redlock.ErrLockLost), and another host may have it by now.
}

func Example_longJob() {
	addrs, stop := servers(3)
	defer stop()
	rl, closeAll := newRedlock(addrs)
	defer closeAll()
	fmt.Println(reindex(context.Background(), rl, func(ctx context.Context) error {
		fmt.Println("reindexing")
		return ctx.Err()
	}))
	// Output:
	// reindexing
	// <nil>
}

// addToBalance is a short critical section that many goroutines and
// processes contend for.
func addToBalance(ctx context.Context, rl *redlock.Redlock, account string, add func()) (err error) {
	mu, err := rl.NewMutex("balance:"+account,
		redlock.WithTTL(2*time.Second)) // a crashed holder blocks the account for 2 s at most
	if err != nil {
		return err
	}
	// Wait in turn with the other waiters (notification, on by default),
	// for a second at most.
	if err := mu.LockWithin(ctx, time.Second); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, mu.Unlock(context.WithoutCancel(ctx))) }()
	add()
	return nil
}

func Example_shortSection() {
	addrs, stop := servers(3)
	defer stop()
	rl, closeAll := newRedlock(addrs)
	defer closeAll()
	total := 0
	done := make(chan error)
	for range 4 {
		go func() { done <- addToBalance(context.Background(), rl, "42", func() { total++ }) }()
	}
	for range 4 {
		if err := <-done; err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println(total)
	// Output:
	// 4
}

// newCarefulRedlock returns a Redlock for writes that must never be made by
// a stale holder, on masters that may restart without their data and that
// each have a replica a failover may promote.
func newCarefulRedlock(clients []redis.UniversalClient) (*redlock.Redlock, error) {
	return redlock.New(clients,
		// Every lock gets tokens, which the store checks (redlock.SetFenced).
		redlock.WithFencing(),
		// A node restarted without its keys grants nothing until every lock
		// it may have forgotten expired: the longest TTL in use.
		redlock.WithRestartDelay(time.Minute),
		// A grant counts once a replica has it (only for masters with
		// replicas: without one, every grant fails).
		redlock.WithReplicaAck(1, 50*time.Millisecond))
}

func Example_correctnessCritical() {
	clients, stop := exampleClients(3)
	defer stop()
	rl, err := newCarefulRedlock(clients)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rl.Close(context.Background())
	fmt.Println(rl.Quorum())
	// Output:
	// 2
}

// newEncoders returns the semaphore of a fleet's video encoders, two at a
// time, and says how many nodes must admit each of them.
func newEncoders(rl *redlock.Redlock) (*redlock.Semaphore, error) {
	sem, err := rl.NewSemaphore("encoders", 2)
	if err != nil {
		return nil, err
	}
	// 2 permits on 3 nodes: every permit needs all 3 (N·K/(K+1)+1), so one
	// node down stops new permits. Five nodes need 4, tolerating one down.
	fmt.Printf("quorum %d of %d nodes\n", sem.Quorum(), len(rl.Health()))
	return sem, nil
}

func ExampleSemaphore_Quorum() {
	addrs, stop := servers(3)
	defer stop()
	rl, closeAll := newRedlock(addrs)
	defer closeAll()
	if _, err := newEncoders(rl); err != nil {
		fmt.Println(err)
	}
	// Output:
	// quorum 3 of 3 nodes
}

// newFarRedlock returns a Redlock whose nodes are in three regions, 40 ms
// apart at most.
func newFarRedlock(clients []redis.UniversalClient) (*redlock.Redlock, error) {
	return redlock.New(clients,
		redlock.WithNodeTimeout(200*time.Millisecond), // a few round trips to the farthest node
		redlock.WithTTL(30*time.Second))               // the acquisition's time comes off the validity
}

func Example_farNodes() {
	clients, stop := exampleClients(3)
	defer stop()
	rl, err := newFarRedlock(clients)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rl.Close(context.Background())
	fmt.Println(rl.Quorum())
	// Output:
	// 2
}

// exampleClients returns n clients of fresh servers, and a function that
// closes both.
func exampleClients(n int) ([]redis.UniversalClient, func()) {
	addrs, stop := servers(n)
	var clients []redis.UniversalClient
	for _, addr := range addrs {
		clients = append(clients, redis.NewClient(&redis.Options{Addr: addr}))
	}
	return clients, func() {
		for _, c := range clients {
			_ = c.Close()
		}
		stop()
	}
}
