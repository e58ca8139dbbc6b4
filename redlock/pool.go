package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
)

// Per-node I/O. This file is the only one that talks to a Redis node: the
// algorithm in quorum.go sees each node as a [node], one round trip per
// method, so the transport can change (pipelining, batching concurrent
// callers into one round trip) without touching the algorithm.

// request is one lock operation as a node sees it.
type request struct {
	key string
	// token is the acquisition's random token, or for a reentrant lock the
	// owner id of the Mutex.
	token     string
	ttl       time.Duration
	reentrant bool
	// channel is where a release that frees the lock publishes, so that
	// waiters try again at once; "" publishes nothing. A plain lock
	// publishes its token; a reentrant one publishes notice, unique to the
	// acquisition, since its token (the owner id) repeats.
	channel string
	notice  string
	// all makes a reentrant release drop every hold instead of one.
	all bool
}

// node is one independent Redis master as the algorithm sees it. The ctx of
// each call carries the node timeout; a transport that cannot honour it is
// still safe, because the algorithm stops waiting at that deadline itself.
type node interface {
	// acquire takes the lock if it is free: it sets key to token with the
	// request's TTL if key does not exist (a reentrant lock also takes one
	// more hold when token already owns it). ok is true when key now holds
	// token, including when an earlier try of the same call, retried by the
	// client, had set it; ok is false, with a nil error, when key holds
	// another value.
	acquire(ctx context.Context, r *request) (ok bool, err error)
	// release deletes key if it holds token (a reentrant lock drops one or
	// all holds, and the key once none is left). ok is false when it did not.
	release(ctx context.Context, r *request) (ok bool, err error)
	// extend sets key's time to live if it holds token; it never creates
	// key. ok is false when key did not hold token.
	extend(ctx context.Context, r *request) (ok bool, err error)
	// subscribe opens a subscription to the node's pub/sub channels.
	subscribe() subscription
	// addr names the node in errors.
	addr() string
}

// subscription is one pub/sub connection to a node. It reconnects and
// re-subscribes by itself; messages published while it is down are lost.
type subscription interface {
	subscribe(ctx context.Context, channels ...string) error
	unsubscribe(ctx context.Context, channels ...string) error
	// messages delivers what is published on the subscribed channels; it is
	// closed by close.
	messages() <-chan *redis.Message
	close() error
}

// redisNode is a node reached through a go-redis client.
type redisNode struct {
	client  redis.UniversalClient
	address string
}

func newRedisNode(c redis.UniversalClient) *redisNode {
	return &redisNode{client: c, address: clientAddr(c)}
}

func (n *redisNode) addr() string { return n.address }

func (n *redisNode) acquire(ctx context.Context, r *request) (bool, error) {
	if r.reentrant {
		v, err := scripts.AcquireReentrant.Run(ctx, n.client, []string{r.key}, r.token, r.ttl.Milliseconds()).Int64()
		return v > 0, err
	}
	// SET key token NX GET PX ttl (Redis 7.0 or later). GET makes the answer
	// tell "absent, now set" (nil) from "already holds this value", so a SET
	// that go-redis retried after a network error, whose first try was
	// applied, still counts as granted, and is released if the attempt fails,
	// instead of passing for "held by another". The TTL is always sent in
	// milliseconds.
	cmd := redis.NewStringCmd(ctx, "set", r.key, r.token, "nx", "get", "px", r.ttl.Milliseconds())
	err := n.client.Process(ctx, cmd)
	switch {
	case errors.Is(err, redis.Nil):
		return true, nil // the key was absent: set to token
	case err != nil:
		return false, err
	}
	return cmd.Val() == r.token, nil // held: by this token, or by another value
}

func (n *redisNode) release(ctx context.Context, r *request) (bool, error) {
	if r.reentrant {
		all := "0"
		if r.all {
			all = "1"
		}
		v, err := scripts.ReleaseReentrant.Run(ctx, n.client, []string{r.key}, r.token, all, r.channel, r.notice).Int64()
		return v == 1, err
	}
	v, err := scripts.Release.Run(ctx, n.client, []string{r.key}, r.token, r.channel).Int64()
	return v == 1, err
}

func (n *redisNode) extend(ctx context.Context, r *request) (bool, error) {
	script := scripts.Extend
	if r.reentrant {
		script = scripts.ExtendReentrant
	}
	v, err := script.Run(ctx, n.client, []string{r.key}, r.token, r.ttl.Milliseconds()).Int64()
	return v == 1, err
}

func (n *redisNode) subscribe() subscription {
	// No channel yet: go-redis connects on the first SUBSCRIBE.
	return &redisSubscription{ps: n.client.Subscribe(context.Background())}
}

// redisSubscription adapts a go-redis PubSub.
type redisSubscription struct {
	ps *redis.PubSub
}

func (s *redisSubscription) subscribe(ctx context.Context, channels ...string) error {
	return s.ps.Subscribe(ctx, channels...)
}

func (s *redisSubscription) unsubscribe(ctx context.Context, channels ...string) error {
	return s.ps.Unsubscribe(ctx, channels...)
}

func (s *redisSubscription) messages() <-chan *redis.Message { return s.ps.Channel() }

func (s *redisSubscription) close() error { return s.ps.Close() }

// unsent reports whether err proves that the command never reached the
// node, so that it cannot have taken effect: the connection could not be
// dialled. Any other error leaves the outcome unknown.
func unsent(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// clientAddr names a client's server for errors and duplicate checks.
func clientAddr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case interface{ Options() *redis.Options }:
		return c.Options().Addr
	case interface{ Options() *redis.ClusterOptions }:
		return strings.Join(c.Options().Addrs, ",")
	}
	return fmt.Sprintf("%T", c)
}
