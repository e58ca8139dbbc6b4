package node

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
)

// A reentrant lock's operations (acquire_reentrant.lua,
// extend_reentrant.lua, release_reentrant.lua, fence.lua): on each node
// the lock is a hash under its name, whose one field, the acquisition's
// token, counts its holds.

// ReentrantAcquire takes a reentrant lock: the first hold when Key does
// not exist, one more when Token owns it; each re-arms the TTL. It answers
// as Acquire does; the holder of a refusal is never named (a hash has no
// one value).
type ReentrantAcquire struct {
	Key, Token string
	TTL        time.Duration
	// Reenter marks an acquisition by an owner that already holds the
	// lock: it never creates the key.
	Reenter bool
	// FenceKey and MinUptime are as in Acquire.
	FenceKey  string
	MinUptime int64
	// Ack, when set, makes a grant count only once replicas have it.
	Ack Ack
	enc encoding
}

// Name implements Op.
func (*ReentrantAcquire) Name() string { return "reentrant acquire" }

// HoldsAgain reports whether op takes one more hold on a lock its caller
// holds already (a reentrant lock's owner locking again): its undo drops
// one hold, which on a node that op never reached is a hold the caller
// had, so that it is undone only where it surely applied.
func HoldsAgain(op Op) bool {
	a, ok := op.(*ReentrantAcquire)
	return ok && a.Reenter
}

// Lane implements Laned: the lock's name.
func (o *ReentrantAcquire) Lane() string { return o.Key }

// Encode implements Op.
func (o *ReentrantAcquire) Encode(ctx context.Context, l Layout, cmds []redis.Cmder) []redis.Cmder {
	args := o.enc.args(l, func() []any {
		again := "0"
		if o.Reenter {
			again = "1"
		}
		return evalArgs(scripts.AcquireReentrant, l.keys(o.Key, o.FenceKey), o.Token, o.TTL.Milliseconds(), again, o.MinUptime)
	})
	return o.Ack.encode(ctx, append(cmds, shared(ctx, args)))
}

// Decode implements Op.
func (o *ReentrantAcquire) Decode(cmds []redis.Cmder) Reply {
	return o.Ack.check(cmds, decodeGrant(cmds[0].(*redis.Cmd), o.MinUptime, o.FenceKey))
}
