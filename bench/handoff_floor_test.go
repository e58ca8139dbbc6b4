package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The handoff floor: the least a five-node lock that hands itself over by
// its release can do per acquisition, for BenchmarkHandoff's third row.
// It is no lock to use: no validity, no clock, no undo, no fault handling,
// no fallback but a fixed re-try. A waiter queues its member (its
// process's channel and a token) on every node and waits; a release that
// deletes the holder's key pops the head and, if its process subscribes
// on that server, sets the key to its token and tells it; the waiter holds
// the lock once three nodes said so. The holder's own next Lock goes straight to the
// queue when its release handed the lock over.

// handoffImpls are BenchmarkHandoff's rows: the two libraries and the
// floor.
var handoffImpls = append(slices.Clone(implementations),
	implementation{"handoff floor", newFloorClient},
	implementation{"retention floor K3", newRetentionClient})

// floorRelease: KEYS[1] the lock, KEYS[2] its queue; ARGV[1] the token.
// Returns 2 when it handed the lock over, 1 when it freed it, 0 when the
// key held another value.
var floorRelease = redis.NewScript(`
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return 0 end
redis.call("DEL", KEYS[1])
local head = redis.call("ZPOPMIN", KEYS[2])
if head[1] then
	local ch, token = string.match(head[1], "^([^|]+)|(.+)$")
	if redis.call("PUBSUB", "NUMSUB", ch)[2] > 0 then
		redis.call("SET", KEYS[1], token, "PX", 10000)
		redis.call("PUBLISH", ch, KEYS[1] .. "|" .. token)
		return 2
	end
end
return 1`)

// floorClient is one process of the floor: its node clients and one
// subscription per node to its own channel.
type floorClient struct {
	clients []redis.UniversalClient
	subs    []*redis.PubSub
	channel string
	mu      sync.Mutex
	waiting map[string]chan int // token → the nodes that handed it the lock
	handed  bool                // its last release handed the lock over
	wg      sync.WaitGroup      // the subscriptions' readers
	// With retention (see newRetentionClient): the lock kept after an
	// Unlock, by name, and how many holds in a row the process had.
	keep     int
	retained map[string]*retainedLock
	timers   sync.WaitGroup // the retained locks' timers not yet stopped or done
}

// retainedLock is a lock kept across its Unlock for a while.
type retainedLock struct {
	token string
	holds int
	timer *time.Timer
}

// retentionWindow is how long a retained lock waits for this process's
// next Lock before it is released.
const retentionWindow = time.Millisecond

func newFloorClient(clients []redis.UniversalClient) (lockClient, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	fc := &floorClient{clients: clients, channel: "floor:" + hex.EncodeToString(b), waiting: map[string]chan int{}}
	ctx := context.Background()
	for i, c := range clients {
		if err := floorRelease.Load(ctx, c).Err(); err != nil {
			return nil, err
		}
		ps := c.Subscribe(ctx, fc.channel)
		if _, err := ps.Receive(ctx); err != nil {
			return nil, err
		}
		fc.subs = append(fc.subs, ps)
		fc.wg.Go(func() {
			for msg := range ps.Channel() {
				_, token, _ := strings.Cut(msg.Payload, "|")
				fc.mu.Lock()
				if ch := fc.waiting[token]; ch != nil {
					ch <- i
				}
				fc.mu.Unlock()
			}
		})
	}
	return fc, nil
}

// newRetentionClient is the floor with the one design that could make a
// fair lock's cycle shorter than a handoff (not this library's; its API
// would have to allow it): an Unlock keeps the lock for retentionWindow,
// for keep holds in a row at most, and a Lock of the same process in that
// window takes it back with no round trip. It measures what that would
// give; the window also delays every release that no Lock takes back.
func newRetentionClient(clients []redis.UniversalClient) (lockClient, error) {
	lc, err := newFloorClient(clients)
	if err != nil {
		return nil, err
	}
	fc := lc.(*floorClient)
	fc.keep, fc.retained = 3, map[string]*retainedLock{}
	return fc, nil
}

// takeBack returns the token of the lock on key this process retained,
// and its holds in a row, or "" when it has none or its window closed
// (the timer's function then releases it).
func (fc *floorClient) takeBack(key string) (string, int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	r := fc.retained[key]
	if r == nil || !r.timer.Stop() {
		return "", 0
	}
	fc.timers.Done() // stopped: its function will not run
	delete(fc.retained, key)
	return r.token, r.holds
}

func (fc *floorClient) mutex(key string) (mutex, error) { return &floorMutex{fc: fc, key: key}, nil }

func (fc *floorClient) close(ctx context.Context) error {
	fc.mu.Lock()
	keys := slices.Collect(maps.Keys(fc.retained))
	fc.mu.Unlock()
	for _, key := range keys {
		if token, _ := fc.takeBack(key); token != "" {
			_ = (&floorMutex{fc: fc, key: key, token: token}).release(ctx)
		}
	}
	fc.timers.Wait() // the timers' releases that began meanwhile
	for _, ps := range fc.subs {
		_ = ps.Close()
	}
	fc.wg.Wait()
	return nil
}

// each runs f on every node at once and returns how many said yes.
func (fc *floorClient) each(f func(i int, c redis.UniversalClient) bool) int {
	return eachNode(fc.clients, f)
}

type floorMutex struct {
	fc    *floorClient
	key   string
	token string
	holds int // holds in a row by this process, retention only
}

func (m *floorMutex) Lock(ctx context.Context) error {
	fc := m.fc
	q := len(fc.clients)/2 + 1
	if token, holds := fc.takeBack(m.key); token != "" {
		m.token, m.holds = token, holds+1
		return nil
	}
	m.holds = 1
	for {
		m.token = newToken()
		fc.mu.Lock()
		handed := fc.handed
		fc.mu.Unlock()
		if !handed && m.TryLock(ctx) == nil {
			return nil
		}
		heard := make(chan int, len(fc.clients))
		fc.mu.Lock()
		fc.waiting[m.token] = heard
		fc.handed = false
		fc.mu.Unlock()
		member := fc.channel + "|" + m.token
		fc.each(func(_ int, c redis.UniversalClient) bool {
			return c.ZAdd(ctx, m.key+":q", redis.Z{Score: float64(time.Now().UnixNano()), Member: member}).Err() == nil
		})
		got := 0
		retry := time.NewTimer(200 * time.Millisecond)
		for got < q {
			select {
			case <-heard:
				got++
			case <-retry.C:
				got = -1
			case <-ctx.Done():
				got = -1
			}
			if got < 0 {
				break
			}
		}
		retry.Stop()
		fc.mu.Lock()
		delete(fc.waiting, m.token)
		fc.mu.Unlock()
		if got >= q {
			return nil
		}
		fc.each(func(_ int, c redis.UniversalClient) bool {
			_ = c.ZRem(context.Background(), m.key+":q", member).Err()
			_ = floorRelease.Run(context.Background(), c, []string{m.key, m.key + ":q"}, m.token).Err()
			return true
		})
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (m *floorMutex) TryLock(ctx context.Context) error {
	fc := m.fc
	n := fc.each(func(_ int, c redis.UniversalClient) bool { return c.SetNX(ctx, m.key, m.token, ttl).Val() })
	if n >= len(fc.clients)/2+1 {
		return nil
	}
	_ = m.release(ctx) // the undo: never retained
	return errors.New("floor: not acquired")
}

func (m *floorMutex) Unlock(ctx context.Context) error {
	fc := m.fc
	if fc.keep > 0 && m.holds < fc.keep+1 {
		fc.mu.Lock()
		r := &retainedLock{token: m.token, holds: m.holds}
		fc.timers.Add(1)
		r.timer = time.AfterFunc(retentionWindow, func() {
			defer fc.timers.Done()
			fc.mu.Lock()
			mine := fc.retained[m.key] == r
			if mine {
				delete(fc.retained, m.key)
			}
			fc.mu.Unlock()
			if mine {
				_ = (&floorMutex{fc: fc, key: m.key, token: r.token}).release(context.Background())
			}
		})
		fc.retained[m.key] = r
		fc.mu.Unlock()
		return nil
	}
	return m.release(ctx)
}

// release releases the lock on every node.
func (m *floorMutex) release(ctx context.Context) error {
	fc := m.fc
	var mu sync.Mutex
	handed := 0
	fc.each(func(_ int, c redis.UniversalClient) bool {
		r, err := floorRelease.Run(ctx, c, []string{m.key, m.key + ":q"}, m.token).Int()
		if err == nil && r == 2 {
			mu.Lock()
			handed++
			mu.Unlock()
		}
		return err == nil
	})
	fc.mu.Lock()
	fc.handed = handed > 0
	fc.mu.Unlock()
	return nil
}

func (m *floorMutex) Until() time.Time { return time.Time{} }
