package node

import (
	"context"
	"time"
)

// Clock evidence. Redis expires keys by its own wall clock, so a node whose
// clock jumped forgets the locks it granted. An operation that votes (a
// grant, an extension) is Timed: the transport ends the pipeline that
// carries it with TIME, on the same connection in the same round trip (one
// TIME for the whole batch), and its Reply carries the node's time, so
// that a vote and the clock it was given under arrive together. A node laid out as a Redis Cluster or Ring carries none (TIME
// has no key, and would be answered by any of its masters).

// Timed is an Op whose reply carries the node's time (Reply.Time).
type Timed interface {
	Op
	// Timed marks the operation.
	Timed()
}

// Timed implements Timed: a grant, of any shape, is a vote.
func (*Acquire) Timed() {}

// Timed implements Timed: an extension, of any shape, is a vote.
func (*Extend) Timed() {}

// Clock asks a node its time and nothing else: TIME. Its Reply is OK with
// Time set.
type Clock struct{}

// Name implements Op.
func (Clock) Name() string { return "clock" }

// Timed implements Timed.
func (Clock) Timed() {}

// Encode implements Op: nothing but the TIME the transport ends the
// batch with (it sends a Timed call even with no command of its own).
func (Clock) Encode(_ Layout, cmds []Cmd) []Cmd { return cmds }

// Decode implements Op.
func (Clock) Decode([]Cmd) Reply { return Reply{OK: true} }

// Transact implements Transacted.
func (Clock) Transact(context.Context, *Tx) Reply { return Reply{OK: true} }

// clockFor reports whether a batch's pipeline ends with TIME: when a call
// of the batch is Timed and the layout has one server. One TIME serves the
// whole batch: its operations were applied in that round trip, on that
// connection, just before it.
func (n *Redis) clockFor(batch []*call) bool {
	if n.layout.Sharded {
		return false
	}
	mine := n.clockOn.Load() // until a TIME was answered, a refusal is found out here
	for _, c := range batch {
		if isTimed(c.op) && (!mine || !c.ownsClock()) {
			return true
		}
	}
	return false
}

// ownsClock reports whether op's own script answers with the node's time
// (an unfenced grant of a plain lock or a writer, a reader's, a permit's):
// its Reply carries it without the batch's TIME,
// once the node has answered one TIME (before that, the batch's TIME is
// how a user without it is found out and reported, see Config.OnNoClock). A
// refusal then carries no time, which is no loss: it is no vote.
func ownsClock(op Op) bool {
	a, ok := op.(*Acquire)
	switch {
	case !ok:
		return false
	case a.Shape == Write:
		return a.FenceKey == ""
	case a.Shape == Read, a.Shape == Semaphore:
		return true
	}
	return a.plain()
}

// ownsClock is ownsClock of c's operation as c carries it: a plain grant
// in the server's own SET NX GET PX reads no time, and needs the batch's
// TIME when it was asked for the clock (see Acquire.Clock).
func (c *call) ownsClock() bool {
	if a, ok := c.op.(*Acquire); ok && c.native {
		return !a.Clock
	}
	return ownsClock(c.op)
}

// timeArgs are TIME's arguments, shared: a transport only reads them.
var timeArgs = []any{"time"}

func isTimed(op Op) bool {
	_, ok := op.(Timed)
	return ok
}

// readClock returns the time clock read, zero when none (or it failed:
// a refusal for good is told once, see Config.OnNoClock).
func (n *Redis) readClock(clock *Cmd) time.Time {
	at, err := clock.Time()
	n.noClock(err)
	if err == nil {
		n.clockOn.Store(true)
	}
	return at
}

// noClock tells, once, that the node refused TIME with err. A refusal of
// the client as a whole (a wrong password) is no refusal of TIME: every
// vote of the node fails with it, and says so.
func (n *Redis) noClock(err error) {
	if err != nil && Misconfigured(err) && !AuthFailure(err) && n.onNoClock != nil {
		n.clockOff.Do(func() { n.onNoClock(Classify(err)) })
	}
}

// clockOf asks the node for its time, for an operation carried without
// scripts (its own round trip).
func (n *Redis) clockOf(ctx context.Context, op Op) time.Time {
	if _, ok := op.(Timed); !ok || n.layout.Sharded {
		return time.Time{}
	}
	clock := NewCmd(timeArgs...)
	n.via.Send(ctx, clock)
	t, err := clock.Time()
	n.noClock(err)
	return t
}
