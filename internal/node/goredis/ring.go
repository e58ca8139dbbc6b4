package goredis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/life"
	"github.com/redlock-go/redlock/internal/node"
)

// ringSubscription is a subscription to every shard of a go-redis Ring.
// A Ring subscribes on the one shard its first channel hashes to, while a
// release publishes on the shard of its lock's key: so that every
// release reaches this process, and that a release's server counts this
// process's subscription (see taker in release.lua), the channels are
// subscribed on every shard that is up when they are added, and the
// shards' messages merged. It is safe for concurrent use.
type ringSubscription struct {
	ring *redis.Ring
	out  chan node.Message
	life life.Group // the forwarders; closing: under mu

	mu       sync.Mutex
	shards   map[*redis.Client]*redis.PubSub
	channels []string // subscribed, for shards that come up later
}

func newRingSubscription(r *redis.Ring) *ringSubscription {
	return &ringSubscription{ring: r, out: make(chan node.Message, 100),
		shards: map[*redis.Client]*redis.PubSub{}}
}

// shard returns c's subscription and the channels to subscribe on it:
// channels, or every channel so far when the subscription is new (it is
// then forwarded to s.out). It returns nil once s is closed.
func (s *ringSubscription) shard(c *redis.Client, channels []string) (*redis.PubSub, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.life.Closed() {
		return nil, nil
	}
	if ps := s.shards[c]; ps != nil {
		return ps, channels
	}
	ps := c.Subscribe(context.Background()) // no channel: no I/O yet
	s.shards[c] = ps
	s.life.Go(func() { forward(ps.Channel(), s.out, s.life.Closing()) })
	return ps, slices.Clone(s.channels)
}

// Subscribe subscribes channels on every shard that is up.
func (s *ringSubscription) Subscribe(ctx context.Context, channels ...string) error {
	s.mu.Lock()
	for _, c := range channels {
		if !slices.Contains(s.channels, c) {
			s.channels = append(s.channels, c)
		}
	}
	s.mu.Unlock()
	return s.ring.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
		ps, chans := s.shard(c, channels)
		if ps == nil {
			return node.ErrClosed
		}
		return ps.Subscribe(ctx, chans...)
	})
}

// Unsubscribe unsubscribes channels on every shard subscribed.
func (s *ringSubscription) Unsubscribe(ctx context.Context, channels ...string) error {
	s.mu.Lock()
	s.channels = slices.DeleteFunc(s.channels, func(c string) bool { return slices.Contains(channels, c) })
	shards := make([]*redis.PubSub, 0, len(s.shards))
	for _, ps := range s.shards {
		shards = append(shards, ps)
	}
	s.mu.Unlock()
	var first error
	for _, ps := range shards {
		if err := ps.Unsubscribe(ctx, channels...); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Messages is every shard's messages.
func (s *ringSubscription) Messages() <-chan node.Message { return s.out }

// Close closes every shard's subscription and waits for the forwarders.
func (s *ringSubscription) Close() error {
	s.mu.Lock()
	if !s.life.Stop() {
		s.mu.Unlock()
		return nil
	}
	shards := s.shards
	s.mu.Unlock()
	for _, ps := range shards {
		_ = ps.Close()
	}
	_ = s.life.Wait(context.Background()) // the forwarders end with their shards' channels
	close(s.out)
	return nil
}

// ringAddr names a Ring by its shards' addresses, sorted.
func ringAddr(r *redis.Ring) string {
	var addrs []string
	for _, a := range r.Options().Addrs {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	return strings.Join(addrs, ",")
}

// A Ring places a key on a shard by hashing over the shards it believes
// up, and moves a down shard's keys to the others (after three failed
// heartbeats). A lock held on the shard that went down is then absent
// where the Ring now looks for it, and the Ring would grant it again: two
// clients whose Rings disagree on which shards are up, or one Ring before
// and after, could hold one name through the same node. A Ring's reply
// therefore counts only when every shard it was given was up before the
// call was sent and after its reply came, and the round trip took less
// than one heartbeat period: a shard's state changes at most once per
// heartbeat, and from all shards up it can only go down, which the second
// look sees. A Ring whose shards changed with SetAddrs is not followed.

// ringWhole returns an error unless every shard r was given is up.
func ringWhole(r *redis.Ring) error {
	if want, got := len(r.Options().Addrs), r.Len(); got != want {
		return fmt.Errorf("%d of the ring's %d shards are up: a down shard's keys are looked for on the others, which may not vote for them", got, want)
	}
	return nil
}

// ringKept returns an error unless every shard of r stayed up during a
// round trip that started at start.
func ringKept(r *redis.Ring, start time.Time, now func() time.Time) error {
	if err := ringWhole(r); err != nil {
		return fmt.Errorf("during the call, %w", err)
	}
	if took, beat := now().Sub(start), r.Options().HeartbeatFrequency; took >= beat {
		return fmt.Errorf("the call took %v, one ring heartbeat (%v) or more: a shard may have gone down and up again, moving keys", took.Round(time.Millisecond), beat)
	}
	return nil
}
