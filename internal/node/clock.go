package node

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Clock evidence. Redis expires keys by its own wall clock, so a node whose
// clock jumped forgets the locks it granted. An operation that votes (a
// grant, an extension) is Timed: the transport sends TIME right after it,
// on the same connection in the same round trip, and its Reply carries the
// node's time, so that a vote and the clock it was given under arrive
// together. A node laid out as a Redis Cluster or Ring carries none (TIME
// has no key, and would be answered by any of its masters).

// Timed is an Op whose reply carries the node's time (Reply.Time).
type Timed interface {
	Op
	// Timed marks the operation.
	Timed()
}

// Timed implements Timed: a grant is a vote.
func (*Acquire) Timed() {}

// Timed implements Timed: an extension is a vote.
func (*Extend) Timed() {}

// Timed implements Timed: a permit's grant is a vote.
func (*SemAcquire) Timed() {}

// Timed implements Timed: a permit's extension is a vote.
func (*SemExtend) Timed() {}

// Timed implements Timed: a read lock's grant is a vote.
func (*ReadAcquire) Timed() {}

// Timed implements Timed: a read lock's extension is a vote.
func (*ReadExtend) Timed() {}

// Clock asks a node its time and nothing else: TIME. Its Reply is OK with
// Time set.
type Clock struct{}

// Name implements Op.
func (Clock) Name() string { return "clock" }

// Timed implements Timed.
func (Clock) Timed() {}

// Encode implements Op: nothing but the TIME the transport adds.
func (Clock) Encode(_ context.Context, _ Layout, cmds []redis.Cmder) []redis.Cmder { return cmds }

// Decode implements Op.
func (Clock) Decode([]redis.Cmder) Reply { return Reply{OK: true} }

// Transact implements Transacted.
func (Clock) Transact(context.Context, *Tx) Reply { return Reply{OK: true} }

// timed appends TIME to cmds when op is Timed and the layout has one
// server.
func timed(ctx context.Context, op Op, l Layout, cmds []redis.Cmder) []redis.Cmder {
	if _, ok := op.(Timed); !ok || l.Sharded {
		return cmds
	}
	return append(cmds, redis.NewTimeCmd(ctx, timeArgs...))
}

// timeArgs are TIME's arguments, shared: go-redis only reads them.
var timeArgs = []any{"time"}

// untimed splits cmds into the operation's own commands and the node's
// time read by the TIME timed added (zero when none, or it failed, with
// its error).
func untimed(op Op, l Layout, cmds []redis.Cmder) ([]redis.Cmder, time.Time, error) {
	if _, ok := op.(Timed); !ok || l.Sharded || len(cmds) == 0 {
		return cmds, time.Time{}, nil
	}
	t, _ := cmds[len(cmds)-1].(*redis.TimeCmd)
	if t == nil {
		return cmds, time.Time{}, nil
	}
	at, err := t.Result()
	return cmds[:len(cmds)-1], at, err
}

// OnNoClock sets what is told, once, when the node refuses TIME for good
// (an ACL user without it): its votes then carry no clock, and the clock
// guard cannot check it. Call it before the first Do.
func (n *Redis) OnNoClock(f func(why error)) { n.onNoClock = f }

// noClock tells, once, that the node refused TIME with err.
func (n *Redis) noClock(err error) {
	if err != nil && Misconfigured(err) && n.onNoClock != nil {
		n.clockOff.Do(func() { n.onNoClock(Classify(err)) })
	}
}

// clockOf asks the node for its time, for an operation carried without
// scripts (its own round trip).
func (n *Redis) clockOf(ctx context.Context, op Op) time.Time {
	if _, ok := op.(Timed); !ok || n.layout.Sharded {
		return time.Time{}
	}
	t, err := n.client.Time(ctx).Result()
	n.noClock(err)
	return t
}
