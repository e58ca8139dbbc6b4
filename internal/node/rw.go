package node

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
)

// The operations of a reader-writer lock. Its writer takes the lock with
// a WriteAcquire and releases it with a WriteRelease; it extends, fences
// and undoes it as a plain lock. Its readers acquire, extend and release
// read holds: on each node the readers are a hash under the lock's name
// (see rw.lua).

// IntentKey is where each node keeps the mark of a writer that waits for
// the readers of lock name to leave: while it is there, no new reader gets
// in.
func IntentKey(name string) string { return name + ":redlock:writer" }

// WriteAcquire takes the write lock of a reader-writer lock: live readers
// refuse it, and a refused writer marks itself waiting at Intent (see
// IntentKey) so that no new reader gets in; otherwise it answers as
// Acquire does.
type WriteAcquire struct {
	Key, Token string
	TTL        time.Duration
	// Intent is where the writer's waiting mark is kept, Writer the
	// writer's id, the same for all its attempts: the mark's value;
	// IntentTTL how long the mark lasts.
	Intent, Writer string
	IntentTTL      time.Duration
	// FenceKey, MinUptime and Ack are as in Acquire.
	FenceKey  string
	MinUptime int64
	Ack       Ack
	enc       encoding
}

// Name implements Op.
func (*WriteAcquire) Name() string { return "write acquire" }

// Lane implements Laned: the lock's name.
func (o *WriteAcquire) Lane() string { return o.Key }

// Encode implements Op.
func (o *WriteAcquire) Encode(ctx context.Context, l Layout, cmds []redis.Cmder) []redis.Cmder {
	args := o.enc.args(l, func() []any {
		keys := append(l.keys(o.Key, o.Intent), l.keys(o.Key, o.FenceKey)[1:]...)
		return evalArgs(scripts.WriteAcquire, keys, o.Token, o.TTL.Milliseconds(), o.MinUptime, o.Writer, o.IntentTTL.Milliseconds())
	})
	return o.Ack.encode(ctx, append(cmds, shared(ctx, args)))
}

// Decode implements Op.
func (o *WriteAcquire) Decode(cmds []redis.Cmder) Reply {
	return o.Ack.check(cmds, decodeGrant(cmds[0].(*redis.Cmd), o.MinUptime, o.FenceKey))
}

// ReadAcquire takes a read hold of the reader-writer lock Key for Token,
// for TTL. A node answers OK when Token is a reader now, including when an
// earlier try of the same command, resent by the client, had made it one
// (its expiry is then re-armed). A refusal's Value is a ReadRefusal.
type ReadAcquire struct {
	Key, Token string
	TTL        time.Duration
	// MinUptime, when positive, is the least uptime in whole seconds at
	// which a node may grant; a node up for less changes nothing and
	// answers an error wrapping ErrNodeRecovering.
	MinUptime int64

	enc encoding
}

// ReadRefusal is why a node refused a ReadAcquire: a writer waits (true),
// or a writer or a Mutex holds the lock (false).
type ReadRefusal struct {
	WriterWaits bool
}

// Name implements Op.
func (*ReadAcquire) Name() string { return "read acquire" }

// Lane implements Laned: the lock's name.
func (o *ReadAcquire) Lane() string { return o.Key }

// Concurrent implements Concurrent: readers commute.
func (o *ReadAcquire) Concurrent() (string, bool) { return o.Token, true }

// Encode implements Op.
func (o *ReadAcquire) Encode(ctx context.Context, l Layout, cmds []redis.Cmder) []redis.Cmder {
	args := o.enc.args(l, func() []any {
		return evalArgs(scripts.ReadAcquire, l.keys(o.Key, IntentKey(o.Key)), o.Token, o.TTL.Milliseconds(), o.MinUptime)
	})
	return append(cmds, shared(ctx, args))
}

// Decode implements Op: read_acquire.lua's grant (the node's time) or
// {status, n}.
func (o *ReadAcquire) Decode(cmds []redis.Cmder) Reply {
	status, n, rep, done := decodeAdmission(cmds[0], "read acquire", o.MinUptime)
	if done {
		return rep
	}
	if status == 1 {
		return Reply{OK: true}
	}
	return Reply{Value: ReadRefusal{WriterWaits: n == 1}}
}
