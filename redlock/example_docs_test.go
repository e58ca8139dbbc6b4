package redlock_test

// The code of the README and of docs/: every ```go block there is a copy of
// consecutive lines of a test file of this package or of redlockotel, so
// that it compiles and, through the examples below, runs. TestDocSnippets
// (doc_snippets_test.go) checks the copies.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// The README's lock taken by hand: five nodes, one lock, steps that extend
// it when its validity runs low.
func Example() {
	addrs, stop := servers(5)
	defer stop()

	// One client per independent Redis master, at go-redis' default options:
	// the configuration this project recommends (docs/API.md, "Client options").
	var clients []redis.UniversalClient
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		clients = append(clients, c)
	}
	rl, err := redlock.New(clients, redlock.WithTTL(10*time.Second)) // no I/O: an error is bad input
	if err != nil {
		log.Fatal(err)
	}
	// Close waits for node calls still in flight (a second past the node
	// timeout at most). It releases nothing: a lock still held when it is
	// called expires after its TTL, and its Done closes.
	defer rl.Close(context.Background())

	steps := []func(){func() { fmt.Println("step 1") }, func() { fmt.Println("step 2") }}
	fmt.Println(processInvoice(context.Background(), rl, steps))
	// Output:
	// step 1
	// step 2
	// <nil>
}

// processInvoice runs steps, each shorter than a second, under the lock
// "invoice:42".
func processInvoice(ctx context.Context, rl *redlock.Redlock, steps []func()) (err error) {
	mu, err := rl.NewMutex("invoice:42") // the TTL given to New: 10 s
	if err != nil {
		return err
	}
	// Wait at most 5 s for the lock. The wait does not bound the hold: the
	// extensions below run under ctx.
	if err := mu.LockWithin(ctx, 5*time.Second); err != nil {
		// errors.Is(err, redlock.ErrNotAcquired), and context.DeadlineExceeded
		// once the 5 s ran out; report.NodeErrors(err) lists the nodes that failed.
		return err
	}
	defer func() {
		// Release even if ctx has ended. nil: no one else held the lock up to
		// the release; ErrNotHeld: the nodes said too few still held it
		// (expired or taken), so someone else may have.
		err = errors.Join(err, mu.Unlock(context.WithoutCancel(ctx)))
	}()
	for _, step := range steps {
		if time.Until(mu.Until()) < time.Second { // not enough validity left for a step
			if err := mu.Extend(ctx); err != nil {
				return err // the lock may be lost: stop acting on the resource
			}
		}
		step()
	}
	return nil
}

func chargeCustomer(context.Context) error { fmt.Println("charged"); return nil }

// chargeInvoice runs the charge under the lock "invoice:42".
func chargeInvoice(ctx context.Context, rl *redlock.Redlock) error {
	err := rl.Do(ctx, "invoice:42", func(ctx context.Context) error {
		// ctx is cancelled if the lock is lost, before its validity ends:
		// context.Cause(ctx) then wraps redlock.ErrLockLost.
		return chargeCustomer(ctx)
	}, redlock.WithTTL(5*time.Second))
	// errors.Is(err, redlock.ErrNotAcquired): fn did not run.
	// errors.Is(err, redlock.ErrLockLost): the lock was lost while fn ran.
	return err
}

func ExampleRedlock_Do() {
	addrs, stop := servers(3)
	defer stop()
	rl, closeAll := newRedlock(addrs)
	defer closeAll()
	fmt.Println(chargeInvoice(context.Background(), rl))
	// Output:
	// charged
	// <nil>
}

// nightlyReport holds "report:nightly", renewed, until the work sends its
// result or the lock is lost.
func nightlyReport(ctx context.Context, rl *redlock.Redlock, work <-chan string) (result string, err error) {
	mu, err := rl.NewMutex("report:nightly", redlock.WithTTL(5*time.Second),
		redlock.WithRenewal(), redlock.WithMaxHold(time.Hour))
	if err != nil {
		return "", err
	}
	// ctx also bounds the renewal (mu.LockWithin bounds the wait alone).
	if err := mu.Lock(ctx); err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, mu.Unlock(context.WithoutCancel(ctx))) }()
	select {
	case <-mu.Done(): // lost: mu.Err() wraps redlock.ErrLockLost
		return "", mu.Err()
	case result = <-work:
		return result, nil
	}
}

func ExampleMutex_Done() {
	addrs, stop := servers(3)
	defer stop()
	rl, closeAll := newRedlock(addrs)
	defer closeAll()
	work := make(chan string, 1)
	work <- "report done"
	fmt.Println(nightlyReport(context.Background(), rl, work))
	// Output:
	// report done <nil>
}

func moveMoney(_ context.Context, from, to string) error {
	fmt.Println("moved from", from, "to", to)
	return nil
}

// transfer moves money between two accounts while it holds both names.
func transfer(ctx context.Context, rl *redlock.Redlock, from, to string) error {
	names := []string{"{acct}:" + from, "{acct}:" + to} // one hash tag: one Cluster slot
	return rl.DoMulti(ctx, names, func(ctx context.Context) error {
		return moveMoney(ctx, from, to)
	})
}

// transferByHand does the same with a multi-name Mutex.
func transferByHand(ctx context.Context, rl *redlock.Redlock, from, to string) (err error) {
	mu, err := rl.NewMultiMutex([]string{"{acct}:" + from, "{acct}:" + to})
	if err != nil {
		return err
	}
	if err := mu.Lock(ctx); err != nil { // every name, or none
		return err
	}
	defer func() { err = errors.Join(err, mu.Unlock(context.WithoutCancel(ctx))) }()
	return moveMoney(ctx, from, to)
}

func ExampleRedlock_DoMulti() {
	addrs, stop := servers(3)
	defer stop()
	rl, closeAll := newRedlock(addrs)
	defer closeAll()
	ctx := context.Background()
	fmt.Println(transfer(ctx, rl, "7", "9"))
	fmt.Println(transferByHand(ctx, rl, "9", "7"))
	// Output:
	// moved from 7 to 9
	// <nil>
	// moved from 9 to 7
	// <nil>
}

func loadCatalog(context.Context) error { fmt.Println("read"); return nil }

func rewriteCatalog(context.Context) error { fmt.Println("written"); return nil }

// readCatalog reads under a read lock: many readers at once, or one writer.
func readCatalog(ctx context.Context, rl *redlock.Redlock) (err error) {
	rw, err := rl.NewRWMutex("catalog")
	if err != nil {
		return err
	}
	if err := rw.RLock(ctx); err != nil { // or TryRLock: one attempt
		return err
	}
	defer func() { err = errors.Join(err, rw.RUnlock(context.WithoutCancel(ctx))) }()
	return loadCatalog(ctx)
}

// updateCatalog reads, then writes, each under its lock.
func updateCatalog(ctx context.Context, rl *redlock.Redlock) error {
	// fn under a read lock, renewed, its context cancelled on loss:
	if err := rl.DoRead(ctx, "catalog", loadCatalog); err != nil {
		return err
	}
	// The write lock: to the readers, a Mutex of the same name is the writer
	// (rw.Lock, rw.TryLock and rw.Unlock take the same lock).
	return rl.Do(ctx, "catalog", rewriteCatalog)
}

func ExampleRWMutex() {
	addrs, stop := servers(3)
	defer stop()
	rl, closeAll := newRedlock(addrs)
	defer closeAll()
	ctx := context.Background()
	fmt.Println(readCatalog(ctx, rl))
	fmt.Println(updateCatalog(ctx, rl))
	// Output:
	// read
	// <nil>
	// read
	// written
	// <nil>
}

func encodeVideo(context.Context) error { fmt.Println("encoded"); return nil }

// encode runs under one of two permits shared by every process.
func encode(ctx context.Context, rl *redlock.Redlock) (err error) {
	sem, err := rl.NewSemaphore("encoders", 2) // K = 2 permits
	if err != nil {
		return err
	}
	if err := sem.Acquire(ctx); err != nil { // waits (queued, woken on releases) for a permit
		return err
	}
	defer func() { err = errors.Join(err, sem.Release(context.WithoutCancel(ctx))) }()
	// Work until sem.Until(), or sem.Extend(ctx) before it; sem.Done() closes
	// if the permit is lost.
	return encodeVideo(ctx)
}

func ExampleSemaphore_Acquire() {
	addrs, stop := servers(5)
	defer stop()
	rl, closeAll := newRedlock(addrs)
	defer closeAll()
	fmt.Println(encode(context.Background(), rl))
	// Output:
	// encoded
	// <nil>
}

// writeTotal writes an invoice's total, fenced: a holder that lost the lock
// while it computed cannot overwrite a later holder's total.
func writeTotal(ctx context.Context, rl *redlock.Redlock, store redis.Scripter, total string) error {
	return rl.Do(ctx, "invoice:7", func(ctx context.Context) error {
		fence := redlock.MutexFrom(ctx).Fence()
		// ... compute, then write with the token:
		err := redlock.SetFenced(ctx, store, "invoice:7:total", total, fence)
		// errors.Is(err, redlock.ErrStaleFence): a later holder has written
		return err
	}, redlock.WithFencing())
}

func Example_fencing() {
	addrs, stop := servers(4)
	defer stop()
	rl, closeAll := newRedlock(addrs[:3])
	defer closeAll()
	store := redis.NewClient(&redis.Options{Addr: addrs[3]}) // the resource
	defer store.Close()
	ctx := context.Background()
	fmt.Println(writeTotal(ctx, rl, store, "120"))
	fmt.Println(store.Get(ctx, "invoice:7:total").Val())
	// Output:
	// <nil>
	// 120
}

// lostCounter is an Observer that counts lost acquisitions.
type lostCounter struct{ lost atomic.Int64 }

// OpStart: Lock, TryLock, Unlock, Extend (renewal's too) start.
func (c *lostCounter) OpStart(ctx context.Context, op report.Op) context.Context { return ctx }

// OpEnd: ... and return (res.Err, res.Canceled, res.Attempts).
func (c *lostCounter) OpEnd(ctx context.Context, op report.Op, res report.OpResult) {}

// LeaseEnd: an acquisition ended, unlocked or lost (before Done closes).
func (c *lostCounter) LeaseEnd(h report.Lease) {
	if h.Lost {
		c.lost.Add(1)
	}
}

// NodeFailed: a node call failed, even after its operation returned.
func (c *lostCounter) NodeFailed(ctx context.Context, e *report.NodeError) {}

func ExampleWithObserver() {
	addrs, stop := servers(3)
	defer stop()
	obs := &lostCounter{}
	rl, closeAll := newRedlock(addrs, redlock.WithObserver(obs))
	defer closeAll()
	ctx := context.Background()
	mu, _ := rl.NewMutex("job")
	_ = mu.Lock(ctx)
	_, _ = rl.ForceUnlock(ctx, "job") // an operator frees it: the holder's next Extend finds out
	fmt.Println(errors.Is(mu.Extend(ctx), redlock.ErrLockLost), obs.lost.Load())
	// Output:
	// true 1
}
