package redlock

import (
	"context"
	"errors"
	"fmt"
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
	// does not exist. ok is false, with a nil error, when the key exists.
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
	// SET key token PX ttl NX, spelled out so that the TTL is always sent in
	// milliseconds whatever its size.
	cmd := redis.NewStatusCmd(ctx, "set", key, token, "px", ttl.Milliseconds(), "nx")
	err := n.client.Process(ctx, cmd)
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil // the key exists: held by another value
	case err != nil:
		return false, err
	}
	return true, nil
}

func (n *redisNode) release(ctx context.Context, key, token string) (bool, error) {
	v, err := scripts.Release.Run(ctx, n.client, []string{key}, token).Int64()
	return v == 1, err
}

func (n *redisNode) extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	v, err := scripts.Extend.Run(ctx, n.client, []string{key}, token, ttl.Milliseconds()).Int64()
	return v == 1, err
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
