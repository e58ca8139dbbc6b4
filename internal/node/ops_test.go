package node_test

import (
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// Operations of the tests, on name k (package conformance has the cases').

const ttl = 10 * time.Second

func lock(k, token string) *node.Acquire { return &node.Acquire{Key: k, Token: token, TTL: ttl} }

func unlock(k, token string) *node.Release {
	return &node.Release{Key: k, Token: token, Channel: node.ReleaseChannel(k), QueueKey: node.QueueKey(k)}
}

func extend(k, token string, d time.Duration) *node.Extend {
	return &node.Extend{Key: k, Token: token, TTL: d}
}

func sem(k, token string, permits int) *node.Acquire {
	return &node.Acquire{Shape: node.Semaphore, Key: k, Token: token, TTL: ttl, Permits: permits}
}

func fenced(k, token string) *node.Acquire {
	return &node.Acquire{Key: k, Token: token, TTL: ttl, FenceKey: node.FenceKey(k)}
}
