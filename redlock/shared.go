package redlock

import (
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// A Semaphore's engine holds shared holds of two kinds: a permit of a
// counting semaphore, and a read hold of a reader-writer lock. They differ
// only in their per-node operations, their Observer kinds and their quorum.

// sharing makes the per-node operations of one kind of shared hold of a
// name.
type sharing interface {
	acquire(name, token string, cfg *config) node.Op
	// release announces itself to waiters; undo gives back a failed
	// attempt's hold silently.
	release(name, token string) node.Op
	undo(name, token string) node.Op
	extend(name, token string, ttl time.Duration) node.Op
	// kinds are the Observer's names of Acquire, TryAcquire, Release and
	// Extend.
	kinds() [4]OpKind
}

// permitsOf is a counting semaphore's sharing: one of permits permits.
type permitsOf int

func (p permitsOf) acquire(name, token string, cfg *config) node.Op {
	return &node.SemAcquire{Key: name, Token: token, TTL: cfg.ttl, Permits: int(p), MinUptime: minUptime(cfg.restart)}
}

func (permitsOf) release(name, token string) node.Op {
	return &node.SemRelease{Key: name, Token: token, Channel: node.ReleaseChannel(name), QueueKey: node.QueueKey(name)}
}

func (permitsOf) undo(name, token string) node.Op { return &node.SemRelease{Key: name, Token: token} }

func (permitsOf) extend(name, token string, ttl time.Duration) node.Op {
	return &node.SemExtend{Key: name, Token: token, TTL: ttl}
}

func (permitsOf) kinds() [4]OpKind {
	return [4]OpKind{OpAcquire, OpTryAcquire, OpRelease, OpExtendPermit}
}

// reading is a reader-writer lock's read holds.
type reading struct{}

func (reading) acquire(name, token string, cfg *config) node.Op {
	return &node.ReadAcquire{Key: name, Token: token, TTL: cfg.ttl, MinUptime: minUptime(cfg.restart)}
}

func (reading) release(name, token string) node.Op {
	return &node.ReadRelease{Key: name, Token: token, Channel: node.ReleaseChannel(name), QueueKey: node.QueueKey(name)}
}

func (reading) undo(name, token string) node.Op { return &node.ReadRelease{Key: name, Token: token} }

func (reading) extend(name, token string, ttl time.Duration) node.Op {
	return &node.ReadExtend{Key: name, Token: token, TTL: ttl}
}

func (reading) kinds() [4]OpKind { return [4]OpKind{OpRLock, OpTryRLock, OpRUnlock, OpExtendRead} }
