package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlock"
)

// primitivesAct shows the reader-writer lock and the counting semaphore on
// the same five nodes: readers share a name while a writer waits, a reader
// that comes once the writer waits waits behind it, and six workers share
// two permits.
func primitivesAct(ctx context.Context, cluster *nodes) error {
	clients := cluster.Clients(&redis.Options{})
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	rl, err := redlock.New(clients, redlock.WithTTL(2*time.Second))
	if err != nil {
		return err
	}
	defer func() { _ = rl.Close(context.Background()) }()
	if err := readersAndWriter(ctx, rl); err != nil {
		return err
	}
	return permits(ctx, rl)
}

func readersAndWriter(ctx context.Context, rl *redlock.Redlock) error {
	fmt.Println("reader-writer lock: three readers share demo:catalog; a writer waits for them,")
	fmt.Println("and no new reader gets in while it waits")
	readers := make([]*redlock.RWMutex, 3)
	for i := range readers {
		rw, err := rl.NewRWMutex("demo:catalog")
		if err != nil {
			return err
		}
		if err := rw.RLock(ctx); err != nil {
			return err
		}
		readers[i] = rw
	}
	fmt.Println("  3 readers hold it at once")
	writer, err := rl.NewRWMutex("demo:catalog")
	if err != nil {
		return err
	}
	switch err := writer.TryLock(ctx); {
	case err == nil:
		return errors.New("a writer got in beside readers")
	case !errors.Is(err, redlock.ErrNotAcquired):
		return err
	}
	late, err := rl.NewRWMutex("demo:catalog")
	if err != nil {
		return err
	}
	lateErr := late.TryRLock(ctx)
	fmt.Printf("  the writer waits; a new reader is refused meanwhile: %v\n", errors.Is(lateErr, redlock.ErrNotAcquired))
	if lateErr == nil {
		return errors.New("a new reader got in while a writer waited")
	}
	start := time.Now()
	left := make(chan struct{})
	go func() {
		defer close(left)
		time.Sleep(300 * time.Millisecond)
		for _, rw := range readers {
			_ = rw.RUnlock(context.WithoutCancel(ctx))
		}
	}()
	err = writer.Lock(ctx)
	<-left
	if err != nil {
		return err
	}
	fmt.Printf("  the readers leave after 300ms; the writer holds it alone after %v\n", time.Since(start).Round(time.Millisecond))
	return writer.Unlock(ctx)
}

func permits(ctx context.Context, rl *redlock.Redlock) error {
	const workers, k = 6, 2
	fmt.Printf("counting semaphore: %d workers take turns at %d permits of demo:encoders, never more than %d at once\n", workers, k, k)
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	quorum := 0
	for range workers {
		sem, err := rl.NewSemaphore("demo:encoders", k)
		if err != nil {
			return err
		}
		quorum = sem.Quorum()
		wg.Go(func() {
			for range 3 {
				if err := sem.Acquire(ctx); err != nil {
					errs <- err
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(50 * time.Millisecond)
				inside.Add(-1)
				if err := sem.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("  %d holds, at most %d at once (each admitted by %d of 5 nodes: N*K/(K+1)+1)\n", workers*3, most.Load(), quorum)
	if most.Load() > k {
		return fmt.Errorf("%d holders at once, more than %d permits", most.Load(), k)
	}
	return nil
}
