package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlock"
)

// errBusy is what every implementation returns for a lock it did not get.
var errBusy = errors.New("not acquired")

// impl is one lock implementation under test. lock makes exactly one
// attempt; on success it returns the matching release.
type impl struct {
	name  string
	nodes int
	lock  func(ctx context.Context, key string) (release func(context.Context) error, err error)
	close func()
	// ready, when set, waits until the nodes can serve the
	// implementation, before its benchmark starts (nil: at once).
	ready func()
}

const ttl = 10 * time.Second

func newRedlockImpl(clients []redis.UniversalClient) impl {
	return redlockImpl("redlock-go", clients)
}

// The costs of the safety options, against the plain lock in BenchmarkPair.
func newFencedImpl(clients []redis.UniversalClient) impl {
	return redlockImpl("redlock-go fenced", clients, redlock.WithFencing())
}

// newNoScriptsImpl is the plain lock on nodes spoken to without Lua
// scripts (transactions on Redis 7, see docs/DEPLOYMENTS.md).
func newNoScriptsImpl(clients []redis.UniversalClient) impl {
	return redlockImpl("redlock-go without scripts", clients, redlock.WithoutScripts())
}

// newRestartDelayImpl is the plain lock with a restart delay of one TTL:
// a node up for less grants nothing, so its benchmark first waits until
// every node has been up longer (servers started for the run, as make
// bench-cpu's are, otherwise fail its first pairs: "not acquired").
func newRestartDelayImpl(clients []redis.UniversalClient) impl {
	im := redlockImpl("redlock-go restart-delay", clients, redlock.WithRestartDelay(ttl))
	// The delay counts in whole seconds, and one more (see
	// redlock.WithRestartDelay).
	im.ready = func() { waitUptime(clients, ttl+2*time.Second) }
	return im
}

// waitUptime waits until every node of clients reports an uptime of at
// least d, or d and five seconds more have passed.
func waitUptime(clients []redis.UniversalClient, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Second)
	defer cancel()
	for _, c := range clients {
		for ctx.Err() == nil {
			info, err := c.Info(ctx, "server").Result()
			if err == nil && uptime(info) >= d {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// uptime reads uptime_in_seconds from an INFO reply.
func uptime(info string) time.Duration {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "uptime_in_seconds:"); ok {
			s, _ := strconv.Atoi(v)
			return time.Duration(s) * time.Second
		}
	}
	return 0
}

// newMultiImpl takes two names at once with one multi-name lock.
func newMultiImpl(clients []redis.UniversalClient) impl {
	return redlockImplOf("redlock-go multi (2 names)", clients, func(rl *redlock.Redlock, key string) (*redlock.Mutex, error) {
		return rl.NewMultiMutex([]string{key, key + ":2"})
	})
}

func redlockImpl(name string, clients []redis.UniversalClient, opts ...redlock.Option) impl {
	return redlockImplOf(name, clients, func(rl *redlock.Redlock, key string) (*redlock.Mutex, error) { return rl.NewMutex(key) }, opts...)
}

// redlockImplOf locks the Mutex newMutex makes for each key.
func redlockImplOf(name string, clients []redis.UniversalClient, newMutex func(*redlock.Redlock, string) (*redlock.Mutex, error), opts ...redlock.Option) impl {
	return redlockImplWith(name, clients, func(rl *redlock.Redlock, key string) (holder, error) {
		m, err := newMutex(rl, key)
		return mutexHold{m}, err
	}, opts...)
}

// holder is one holder of a redlock-go primitive: its single attempt and
// its release. The adapters below are one pointer each, so that a holder
// costs no allocation: the figures stay those of the primitive.
type holder interface {
	try(context.Context) error
	release(context.Context) error
}

type mutexHold struct{ *redlock.Mutex }

func (h mutexHold) try(ctx context.Context) error     { return h.TryLock(ctx) }
func (h mutexHold) release(ctx context.Context) error { return h.Unlock(ctx) }

type permitHold struct{ *redlock.Semaphore }

func (h permitHold) try(ctx context.Context) error     { return h.TryAcquire(ctx) }
func (h permitHold) release(ctx context.Context) error { return h.Release(ctx) }

type readHold struct{ *redlock.RWMutex }

func (h readHold) try(ctx context.Context) error     { return h.TryRLock(ctx) }
func (h readHold) release(ctx context.Context) error { return h.RUnlock(ctx) }

type writeHold struct{ *redlock.RWMutex }

func (h writeHold) try(ctx context.Context) error     { return h.TryLock(ctx) }
func (h writeHold) release(ctx context.Context) error { return h.Unlock(ctx) }

// The other primitives, beside the Mutex: a semaphore of three permits,
// and a reader-writer lock's read and write locks.
func newSemaphoreImpl(clients []redis.UniversalClient) impl {
	return redlockImplWith("redlock-go semaphore (3 permits)", clients, func(rl *redlock.Redlock, key string) (holder, error) {
		s, err := rl.NewSemaphore(key, 3)
		return permitHold{s}, err
	})
}

func newReadImpl(clients []redis.UniversalClient) impl {
	return redlockImplWith("redlock-go RWMutex read", clients, func(rl *redlock.Redlock, key string) (holder, error) {
		rw, err := rl.NewRWMutex(key)
		return readHold{rw}, err
	})
}

func newWriteImpl(clients []redis.UniversalClient) impl {
	return redlockImplWith("redlock-go RWMutex write", clients, func(rl *redlock.Redlock, key string) (holder, error) {
		rw, err := rl.NewRWMutex(key)
		return writeHold{rw}, err
	})
}

// redlockImplWith takes the holder newHolder makes for each key.
func redlockImplWith(name string, clients []redis.UniversalClient, newHolder func(*redlock.Redlock, string) (holder, error), opts ...redlock.Option) impl {
	rl, err := redlock.New(clients, append([]redlock.Option{redlock.WithTTL(ttl)}, opts...)...)
	if err != nil {
		panic(err)
	}
	return redlockImplOver(name, rl, len(clients), newHolder)
}

// redlockImplOver is redlockImplWith over rl, a Redlock of n nodes made
// already.
func redlockImplOver(name string, rl *redlock.Redlock, n int, newHolder func(*redlock.Redlock, string) (holder, error)) impl {
	im := impl{name: name, nodes: n, close: func() { _ = rl.Close(context.Background()) }}
	im.lock = func(ctx context.Context, key string) (func(context.Context) error, error) {
		h, err := newHolder(rl, key)
		if err != nil {
			return nil, err
		}
		if err := h.try(ctx); err != nil {
			if errors.Is(err, redlock.ErrNotAcquired) {
				return nil, errBusy
			}
			return nil, err
		}
		return h.release, nil
	}
	return im
}

func newRedsyncImpl(clients []redis.UniversalClient) impl {
	pools := make([]redsyncredis.Pool, len(clients))
	for i, c := range clients {
		pools[i] = goredis.NewPool(c)
	}
	return redsyncOver("redsync", redsync.New(pools...), len(clients))
}

// redsyncOver is redsync's impl over rs, of n nodes.
func redsyncOver(name string, rs *redsync.Redsync, n int) impl {
	return impl{
		name:  name,
		nodes: n,
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			m := rs.NewMutex(key, redsync.WithTries(1), redsync.WithExpiry(ttl))
			if err := m.LockContext(ctx); err != nil {
				return nil, errBusy
			}
			return func(ctx context.Context) error {
				_, err := m.UnlockContext(ctx)
				return err
			}, nil
		},
		close: func() {},
	}
}

// newBsmImpl is bsm/redislock on the first node only: a single-node lock,
// the speed a five-node lock would have with no fan-out cost at all.
func newBsmImpl(clients []redis.UniversalClient) impl {
	c := redislock.New(clients[0])
	return impl{
		name:  "bsm/redislock (1 node)",
		nodes: 1,
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			l, err := c.Obtain(ctx, key, ttl, nil)
			if err != nil {
				if errors.Is(err, redislock.ErrNotObtained) {
					return nil, errBusy
				}
				return nil, err
			}
			return l.Release, nil
		},
		close: func() {},
	}
}

var rawRelease = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// newRawImpl is the floor: SET NX PX on every node in parallel, success on
// a majority, then compare-and-delete on every node in parallel. No early
// decision, no validity arithmetic, no cleanup ordering: the least a
// correct-looking five-node lock does.
func newRawImpl(clients []redis.UniversalClient) impl {
	for _, c := range clients {
		_ = rawRelease.Load(context.Background(), c).Err()
	}
	all := func(ctx context.Context, f func(context.Context, redis.UniversalClient) bool) int {
		return eachNode(clients, func(_ int, c redis.UniversalClient) bool { return f(ctx, c) })
	}
	return impl{
		name:  "raw floor",
		nodes: len(clients),
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			token := newToken()
			release := func(ctx context.Context) error {
				all(ctx, func(ctx context.Context, c redis.UniversalClient) bool {
					return rawRelease.Run(ctx, c, []string{key}, token).Err() == nil
				})
				return nil
			}
			ok := all(ctx, func(ctx context.Context, c redis.UniversalClient) bool {
				return c.SetNX(ctx, key, token, ttl).Val()
			})
			if ok < len(clients)/2+1 {
				_ = release(ctx)
				return nil, errBusy
			}
			return release, nil
		},
		close: func() {},
	}
}

// newReadOneNameImpl takes read locks of one name whatever the key, so
// that the readers of a run hold it together.
func newReadOneNameImpl(clients []redis.UniversalClient) impl {
	im := newReadImpl(clients)
	im.name = "redlock-go RWMutex read one name"
	lock := im.lock
	im.lock = func(ctx context.Context, _ string) (func(context.Context) error, error) {
		return lock(ctx, "readers:one")
	}
	return im
}

// eachNode runs f on every node at once and returns how many said yes.
func eachNode(clients []redis.UniversalClient, f func(i int, c redis.UniversalClient) bool) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for i, c := range clients {
		wg.Go(func() {
			if f(i, c) {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return n
}

// newToken is a random lock value.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
