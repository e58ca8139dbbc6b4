package node

import (
	"context"
	"slices"
	"time"
)

// The plain lock's native calls in the node's batches (see native.go):
// which calls of a batch share its pipeline, what leads it, and what their
// replies leave open, asked once the round trip is over.

// pipelinable splits the batch of a node without scripts into the calls
// whose commands are the server's own (see native.go), batched in one
// round trip as scripts are, and the rest, carried by transactions.
func pipelinable(batch []*call) (pipelined, rest []*call) {
	var names [MaxBatch]string
	for i, c := range batch {
		names[i] = LaneOf(c.op)
	}
	pipelined = batch[:0]
	first := -1 // a release that may lead the pipeline
	for i, c := range batch {
		if !c.native {
			rest = append(rest, c)
			continue
		}
		if _, ok := c.op.(*Release); ok && first < 0 && !slices.Contains(names[:i], names[i]) {
			first = len(pipelined)
		}
		pipelined = append(pipelined, c)
	}
	lead(pipelined, first)
	return pipelined, rest
}

// lead moves the release at first (none when negative) to the head of
// pipelined: go-redis runs its retry checks on the error of a pipeline's
// first reply, and a grant's is nil, which it reads as one (a dozen
// allocations), where a release's reply is a number. Its name has no call
// before it, and names apart may be applied in any order (see Laned).
func lead(pipelined []*call, first int) {
	if first <= 0 {
		return
	}
	c := pipelined[first]
	copy(pipelined[1:first+1], pipelined[:first])
	pipelined[0] = c
}

// pingArgs are PING's arguments, shared: go-redis only reads them.
var pingArgs = []any{"ping"}

// leadsNil reports whether batch's first command is a native grant's SET
// NX GET PX, whose reply is nil when it grants (see pipelinable, which
// puts a release first where the batch has one).
func leadsNil(batch []*call) bool {
	if len(batch) == 0 || !batch[0].native {
		return false
	}
	_, ok := batch[0].op.(*Acquire)
	return ok
}

// openCalls are the native calls of a round trip whose replies left
// something open (see nativeOp.decodeNative), asked once every other call
// of the batch has its reply.
type openCalls struct {
	more     []*call
	asks     []func(context.Context, *Tx) Reply
	gone     []*call
	goneReps []Reply
}

// decode reads native call c's replies: done is set when rep is its
// reply, else c is kept to be asked more.
func (o *openCalls) decode(c *call) (rep Reply, done bool) {
	rep, ask := c.op.(nativeOp).decodeNative(c.cmds)
	switch {
	case ask != nil:
		o.more, o.asks = append(o.more, c), append(o.asks, ask)
		return Reply{}, false
	case isAbsent(rep):
		o.gone, o.goneReps = append(o.gone, c), append(o.goneReps, rep)
		return Reply{}, false
	}
	return rep, true
}

// ask answers the calls kept, on node n, whose round trip read the node's
// time at: the releases that deleted nothing in one round trip for them
// all, each other on a connection of its own.
func (o *openCalls) ask(ctx context.Context, n *Redis, at time.Time) {
	if len(o.gone) > 0 {
		for i, rep := range n.askAbsent(ctx, o.gone, o.goneReps) {
			o.gone[i].finish(rep)
		}
	}
	for i, c := range o.more {
		c.finish(n.timed(c.op, o.asks[i](c.ctx, n.tx(n.Way(), c.sendBy)), at))
	}
}

// askAbsent answers the native releases of calls that deleted nothing
// (see isAbsent; reps are their replies) as release.lua does, with the
// server's run id, asked once for them all (INFO server). A sharded node
// asks each on the key's server.
func (n *Redis) askAbsent(ctx context.Context, calls []*call, reps []Reply) []Reply {
	out := make([]Reply, len(calls))
	if n.layout.Sharded {
		for i, c := range calls {
			out[i] = c.op.(*Release).absent(c.ctx, n.tx(n.Way(), c.sendBy), reps[i].Value.(absent))
		}
		return out
	}
	info := NewText("info", "server")
	n.via.Send(ctx, info)
	id, _ := infoField(info.Text())("run_id") // a user without INFO: "", which matches no server
	for i, c := range calls {
		a, _ := reps[i].Value.(absent)
		out[i] = absentReply(c.op.(*Release), a.other, id)
	}
	return out
}

// absentReply answers release o, which deleted nothing, with other,
// whether its key was there (another's), and id, the server's run id.
func absentReply(o *Release, other bool, id string) Reply {
	switch {
	case o.Channel == "" && other:
		return Reply{} // an undo: no one reads whose server
	case o.Channel == "":
		return Reply{Value: Released{Gone: true}}
	}
	return Reply{Value: Released{Gone: !other, Taken: other, Server: id}}
}
