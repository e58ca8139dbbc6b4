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

// node is one independent Redis master as the algorithm sees it. The ctx of
// each call carries the node timeout; a transport that cannot honour it is
// still safe, because the algorithm stops waiting at that deadline itself.
type node interface {
	// acquire sets key to token with the given time to live, only if key
	// does not exist. ok is true when key now holds token (set by this
	// call, or by an earlier try of the same call that a client retried);
	// ok is false, with a nil error, when key holds another value.
	acquire(ctx context.Context, key, token string, ttl time.Duration) (ok bool, err error)
	// release deletes key if it holds token. ok is false when it did not.
	release(ctx context.Context, key, token string) (ok bool, err error)
	// extend sets key's time to live if it holds token; it never creates
	// key. ok is false when key did not hold token.
	extend(ctx context.Context, key, token string, ttl time.Duration) (ok bool, err error)
	// addr names the node in errors.
	addr() string
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

func (n *redisNode) acquire(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	// SET key token NX GET PX ttl (Redis 7.0 or later). GET makes the answer
	// tell "absent, now set" (nil) from "already holds this value", so a SET
	// that go-redis retried after a network error, whose first try was
	// applied, still counts as granted, and is released if the attempt fails,
	// instead of passing for "held by another". The TTL is always sent in
	// milliseconds.
	cmd := redis.NewStringCmd(ctx, "set", key, token, "nx", "get", "px", ttl.Milliseconds())
	err := n.client.Process(ctx, cmd)
	switch {
	case errors.Is(err, redis.Nil):
		return true, nil // the key was absent: set to token
	case err != nil:
		return false, err
	}
	return cmd.Val() == token, nil // held: by this token, or by another value
}

func (n *redisNode) release(ctx context.Context, key, token string) (bool, error) {
	v, err := scripts.Release.Run(ctx, n.client, []string{key}, token).Int64()
	return v == 1, err
}

func (n *redisNode) extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	v, err := scripts.Extend.Run(ctx, n.client, []string{key}, token, ttl.Milliseconds()).Int64()
	return v == 1, err
}

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
