package node

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-go/redlock/internal/scripts"
)

// Coalescing. Renewal makes the extensions of every lock held fall due
// together (redlock/internal/lease), so a worker's batch often holds dozens
// of plain extensions. Sent as they are, each is one EVALSHA of extend.lua;
// the worker sends each run of them that follow one another in its batch as
// one EVALSHA of extend_many.lua instead, and answers each extension's own
// command from its element of the reply. Decode, the reload after NOSCRIPT
// and the scripts' refusal then read each extension as if it had gone
// alone.
//
// Where the many-key script cannot say what extend.lua would, the run's
// extensions concerned go again alone, in a second round trip, and answer
// what they answer alone: as EVAL when the node lost the script (NOSCRIPT:
// its scripts are loaded again); as they were after any other error reply
// (a key the ACL denies, a read-only replica, a node without scripts),
// and then no run is made on the node for runPause; for one key whose GET
// failed. So that landing later changes nothing, a run carries no
// extension that a later call of its batch on the same name must follow
// (Laned's order). When the batch asked the node's time, it is asked
// again after them: every reply's time is read after its operation. A
// failure to talk to the node is every extension's failure. Not on a
// sharded node: the keys of a run may live on different servers.

// minRun is the fewest extensions coalesced into one script call.
const minRun = 2

// runPause is how long a node makes no run after a run's call was refused
// with an error reply other than NOSCRIPT: a refusal that may last (an ACL
// that denies one name) would otherwise cost each extension a second round
// trip, every batch.
const runPause = time.Minute

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
	if n.layout.Sharded || n.via.Sharded() || n.now().UnixNano() < n.runsFrom.Load() {
		return appendCmds(all, batch)
	}
	if w.findRuns(batch); len(w.runs) == 0 {
		return appendCmds(all, batch)
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

// findRuns sets w.runs to batch's runs: its calls alone that follow one
// another, at least minRun, none followed by a call on its name.
func (w *worker) findRuns(batch []*call) {
	if count(batch, alone) < minRun {
		return // the common batch, of grants and releases: nothing to look for
	}
	followed := w.followed(batch)
	for i := 0; i < len(batch); {
		j := i
		for j < len(batch) && alone(batch[j]) && !followed[j] {
			j++
		}
		if j-i >= minRun {
			w.runs = append(w.runs, coalesced{calls: batch[i:j]})
		}
		i = max(j, i+1)
	}
}

// count is how many calls of batch f holds for.
func count(batch []*call, f func(*call) bool) int {
	n := 0
	for _, c := range batch {
		if f(c) {
			n++
		}
	}
	return n
}

// followed reports, for each call of batch that is alone, whether a later
// call of batch is on its name.
func (w *worker) followed(batch []*call) []bool {
	w.later = append(w.later[:0], make([]bool, len(batch))...)
	if w.names == nil {
		w.names = map[string]struct{}{}
	}
	clear(w.names)
	for i := len(batch) - 1; i >= 0; i-- {
		name := LaneOf(batch[i].op)
		if name == "" {
			continue
		}
		_, w.later[i] = w.names[name]
		w.names[name] = struct{}{}
	}
	return w.later
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
// returns the commands of those that go again alone (see Coalescing).
func (n *Redis) answerRuns(w *worker) []*Cmd {
	var again []*Cmd
	for k := range w.runs {
		r := &w.runs[k]
		err := r.cmd.Err()
		switch {
		case says(err, "NOSCRIPT"):
			n.cached.Store(false)
			n.loadScripts()
			for _, c := range r.calls {
				c.cmds[0], _ = asEval(&c.cmds[0])
			}
		case isReply(err):
			n.runsFrom.Store(n.now().Add(runPause).UnixNano())
		}
		again = r.answer(again)
		w.runs[k] = coalesced{}
	}
	w.runs = w.runs[:0]
	n.sentAlone.Add(uint64(len(again)))
	return again
}

// SentAlone is how many extensions of runs went again alone, since the
// node was made (see Coalescing): the conformance suite's coalesced side
// checks that it sent none.
func (n *Redis) SentAlone() uint64 { return n.sentAlone.Load() }

// ScriptsCached reports whether the node is known to hold every script.
func (n *Redis) ScriptsCached() bool { return n.cached.Load() }

// answer answers each extension of r from r's reply, and appends to again
// the commands of those it cannot answer.
func (r *coalesced) answer(again []*Cmd) []*Cmd {
	err := r.cmd.Err()
	vals, ok := r.cmd.Val().([]any)
	switch {
	case err != nil && !isReply(err) && !errors.Is(err, ErrNil):
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
	if len(ops) == 0 {
		return nil
	}
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
