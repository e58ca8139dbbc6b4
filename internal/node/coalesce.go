package node

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/scripts"
)

// Coalescing. Renewal makes the extensions of every lock held fall due
// together (redlock/internal/lease), so a worker's batch often holds dozens
// of plain extensions. Sent as they are, each is one EVALSHA of extend.lua;
// the worker sends each run of them that follow one another in its batch as
// one EVALSHA of extend_many.lua instead, and answers each extension's own
// command from its element of the reply. Decode, NOSCRIPT's reload and the
// scripts' refusal then read each extension as if it had gone alone.
//
// Where the many-key script cannot say what extend.lua would (its call was
// refused with a reply: a key the ACL denies, a script the node lost, a
// node without scripts; or one key's GET failed), the run's extensions
// concerned go again alone, in a second round trip, and answer what they
// answer alone. They may then land after a later call of the batch on the
// same name: an extension only re-arms its own token's key and answers from
// the state it finds, so no other call's answer depends on where it lands.
// A failure to talk to the node is every extension's failure. Not on a
// sharded node: the keys of a run may live on different servers.

// minRun is the fewest extensions coalesced into one script call.
const minRun = 2

// coalesced is one run of a batch's plain extensions sent as one command.
type coalesced struct {
	calls []*call
	cmd   Cmd
}

// alone reports whether c is a plain extension by extend.lua and nothing
// else (no WAIT), which a run may carry.
func alone(c *call) bool {
	if c.native || len(c.cmds) != 1 {
		return false
	}
	a := c.cmds[0].Args
	return len(a) == 6 && a[0] == evalsha && a[1] == shas[scripts.Extend]
}

// coalesce appends the commands of batch to all, each run of at least
// minRun plain extensions as one extend_many.lua, kept in w.runs.
func (n *Redis) coalesce(w *worker, batch []*call, all []*Cmd) []*Cmd {
	w.runs = w.runs[:0]
	if n.layout.Sharded || n.via.Sharded() {
		return appendCmds(all, batch)
	}
	for i := 0; i < len(batch); {
		j := i
		for j < len(batch) && alone(batch[j]) {
			j++
		}
		if j-i >= minRun {
			w.runs = append(w.runs, coalesced{calls: batch[i:j]})
			i = j
			continue
		}
		i = max(j, i+1)
	}
	k := 0
	for i := 0; i < len(batch); {
		if k < len(w.runs) && &w.runs[k].calls[0] == &batch[i] {
			r := &w.runs[k]
			r.cmd = Cmd{Args: manyArgs(r.calls)}
			all = append(all, &r.cmd)
			i += len(r.calls)
			k++
			continue
		}
		all = appendCmds(all, batch[i:i+1])
		i++
	}
	return all
}

// appendCmds appends the commands of each call of batch to all.
func appendCmds(all []*Cmd, batch []*call) []*Cmd {
	for _, c := range batch {
		for i := range c.cmds {
			all = append(all, &c.cmds[i])
		}
	}
	return all
}

// manyArgs is the EVALSHA of extend_many.lua that carries the extensions
// of calls: each one's key, then each one's token and TTL.
func manyArgs(calls []*call) []any {
	args := make([]any, 0, 3+3*len(calls))
	args = append(args, evalsha, shas[scripts.ExtendMany], len(calls))
	for _, c := range calls {
		args = append(args, c.cmds[0].Args[3])
	}
	for _, c := range calls {
		a := c.cmds[0].Args
		args = append(args, a[4], a[5])
	}
	return args
}

// answerRuns answers each extension of w.runs from its run's reply, and
// sends again alone those it cannot answer (see Coalescing).
func (n *Redis) answerRuns(ctx context.Context, w *worker) {
	var again []*Cmd
	for k := range w.runs {
		again = w.runs[k].answer(again)
		w.runs[k] = coalesced{}
	}
	w.runs = w.runs[:0]
	if again != nil {
		n.via.Send(ctx, again...)
	}
}

// answer answers each extension of r from r's reply, and appends to again
// the commands of those it cannot answer.
func (r *coalesced) answer(again []*Cmd) []*Cmd {
	err := r.cmd.Err()
	vals, ok := r.cmd.Val().([]any)
	switch {
	case err != nil && !isReply(err):
		for _, c := range r.calls {
			c.cmds[0].Answer(nil, err) // the node did not answer: none of them
		}
		return again
	case err != nil || !ok || len(vals) != len(r.calls):
		vals = nil
	}
	for i, c := range r.calls {
		if v, ok := elem(vals, i); ok && v >= 0 {
			c.cmds[0].AnswerInt(v, nil)
		} else {
			again = append(again, &c.cmds[0])
		}
	}
	return again
}

// elem is vals[i] as an integer, and whether it is one.
func elem(vals []any, i int) (int64, bool) {
	if i >= len(vals) {
		return 0, false
	}
	v, ok := vals[i].(int64)
	return v, ok
}

// DoTogether sends ops, spoken with scripts, to the node in one round trip
// of one worker, as if the lanes had handed them to it at once, and returns
// their replies in order. The workers make their batches by timing; the
// conformance suite sends through this what it must see go together (a
// run of extensions, see Coalescing). No op may be a Runner.
func (n *Redis) DoTogether(ctx context.Context, ops ...Op) []Reply {
	n.start.Do(func() { n.run(LaneOf(ops[0])) })
	reps := make([]Reply, len(ops))
	batch := make([]*call, 0, len(ops))
	for i, op := range ops {
		c := &call{ctx: ctx, sendBy: n.now().Add(time.Minute), op: op, done: func(r Reply) { reps[i] = r }}
		c.cmds = op.Encode(n.layout, c.buf[:0])
		batch = append(batch, c)
	}
	n.send(&worker{}, batch)
	return reps
}
