// Command fipsload runs a lock workload against the nodes named in
// REDLOCK_NODES (comma-separated host:port) and exits non-zero on the first
// failure. integration's TestFIPSOnly runs it with GODEBUG=fips140=only, as
// a regulated user's program would run: every operation must work without
// the client hashing anything FIPS 140 mode refuses.
package main

import (
	"context"
	"crypto/fips140"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlock"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fipsload:", err)
		os.Exit(1)
	}
	fmt.Println("fipsload: ok")
}

func run() error {
	if !fips140.Enforced() {
		return errors.New("FIPS 140-only mode is not enforced (run with GODEBUG=fips140=only)")
	}
	addrs := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	clients := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		defer func() { _ = c.Close() }()
		clients[i] = c
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rl, err := redlock.New(clients)
	if err != nil {
		return err
	}
	defer func() { _ = rl.Close(context.Background()) }()
	steps := []struct {
		name string
		run  func(context.Context, *redlock.Redlock) error
	}{
		{"lock, extend, unlock", plain},
		{"fenced", fenced},
		{"reentrant", reentrant},
		{"do", do},
		{"inspect and force unlock", operator},
		{"contended", func(ctx context.Context, rl *redlock.Redlock) error { return contended(ctx, rl, addrs) }},
	}
	for _, s := range steps {
		if err := s.run(ctx, rl); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		// Empty every node's script cache, so that the next step runs its
		// scripts through EVAL after NOSCRIPT, as after a restart.
		for _, c := range clients {
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// cycle locks mu, extends it and unlocks it.
func cycle(ctx context.Context, mu *redlock.Mutex) error {
	if err := mu.Lock(ctx); err != nil {
		return err
	}
	if err := mu.Extend(ctx); err != nil {
		return err
	}
	return mu.Unlock(ctx)
}

func plain(ctx context.Context, rl *redlock.Redlock) error {
	for range 20 {
		mu, err := rl.NewMutex("fips:plain", redlock.WithTTL(5*time.Second))
		if err != nil {
			return err
		}
		if err := cycle(ctx, mu); err != nil {
			return err
		}
	}
	return nil
}

func fenced(ctx context.Context, rl *redlock.Redlock) error {
	mu, err := rl.NewMutex("fips:fenced", redlock.WithFencing())
	if err != nil {
		return err
	}
	if err := mu.Lock(ctx); err != nil {
		return err
	}
	if mu.Fence() == 0 {
		return errors.New("no fencing token")
	}
	return mu.Unlock(ctx)
}

func reentrant(ctx context.Context, rl *redlock.Redlock) error {
	mu, err := rl.NewMutex("fips:reentrant", redlock.WithReentrant())
	if err != nil {
		return err
	}
	if err := mu.Lock(ctx); err != nil {
		return err
	}
	if err := cycle(ctx, mu); err != nil {
		return err
	}
	return mu.Unlock(ctx)
}

func do(ctx context.Context, rl *redlock.Redlock) error {
	return rl.Do(ctx, "fips:do", func(context.Context) error { return nil })
}

func operator(ctx context.Context, rl *redlock.Redlock) error {
	mu, err := rl.NewMutex("fips:operator")
	if err != nil {
		return err
	}
	if err := mu.Lock(ctx); err != nil {
		return err
	}
	st, err := rl.Inspect(ctx, "fips:operator")
	if err != nil {
		return err
	}
	if st.Held < st.Quorum {
		return errors.New("inspect: a held lock reads as free")
	}
	_, err = rl.ForceUnlock(ctx, "fips:operator")
	return err
}

// window is one hold: from Lock's return to the earlier of Unlock and
// Until.
type window struct{ start, end time.Time }

// ledger is what contended's holders did.
type ledger struct {
	mu      sync.Mutex
	windows []window
	errs    []error
	counter int // only the lock guards it: read, sleep, write back
}

// rounds makes n rounds of Lock, a read-sleep-write of the counter,
// Unlock, until an error.
func (l *ledger) rounds(ctx context.Context, m *redlock.Mutex, n int) {
	for range n {
		if err := m.Lock(ctx); err != nil {
			l.mu.Lock()
			l.errs = append(l.errs, err)
			l.mu.Unlock()
			return
		}
		start := time.Now()
		v := l.counter
		time.Sleep(2 * time.Millisecond)
		l.counter = v + 1
		end := time.Now()
		if until := m.Until(); until.Before(end) {
			end = until
		}
		err := m.Unlock(ctx)
		l.mu.Lock()
		l.windows = append(l.windows, window{start, end})
		if err != nil {
			l.errs = append(l.errs, err)
		}
		l.mu.Unlock()
	}
}

// contended is the safety workload of integration's TestSafety tests, in
// this process: rl and a second Redlock with clients of its own (as
// another process would have) contend for one name with two goroutines
// each, 15 rounds of Lock, a read-sleep-write of a counter only the lock
// guards, Unlock. No two holders' windows (Lock returned to the earlier of
// Unlock and Until) may overlap, no update may be lost, and every Unlock
// must find its token on a quorum.
func contended(ctx context.Context, rl *redlock.Redlock, addrs []string) error {
	clients := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		defer func() { _ = c.Close() }()
		clients[i] = c
	}
	other, err := redlock.New(clients)
	if err != nil {
		return err
	}
	defer func() { _ = other.Close(context.Background()) }()
	l := &ledger{}
	var wg sync.WaitGroup
	for _, r := range []*redlock.Redlock{rl, other, rl, other} {
		m, err := r.NewMutex("fips:contended", redlock.WithTTL(5*time.Second))
		if err != nil {
			return err
		}
		wg.Go(func() { l.rounds(ctx, m, 15) })
	}
	wg.Wait()
	if err := errors.Join(l.errs...); err != nil {
		return err
	}
	windows := l.windows
	slices.SortFunc(windows, func(a, b window) int { return a.start.Compare(b.start) })
	var ended time.Time // the latest end of the holds before
	for _, w := range windows {
		if w.start.Before(ended) {
			return fmt.Errorf("two holders at once: a hold began %v before an earlier one ended", ended.Sub(w.start))
		}
		ended = later(ended, w.end)
	}
	if l.counter != len(windows) {
		return fmt.Errorf("%d updates lost in %d holds", len(windows)-l.counter, len(windows))
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
