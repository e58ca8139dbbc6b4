package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// The one fan-out: a round sends one request to every node at once,
// collects the votes as they come, and stops as soon as its rule finds the
// outcome certain, at the node timeout (every node still silent then
// counts as failed with ErrNodeTimeout, and is reported to the pool), or
// when the caller's context ends. Acquire, fence, release, extend,
// inspect, forced release, identify and the waiters' queues all go
// through it; they differ only in their operations and their rule.

// vote is one node's reply to one request of a round.
type vote struct {
	node  int
	rep   node.Reply
	again bool // the reply to a re-ask
}

// round is one request sent to every node, and the votes coming back.
// Votes arrive on a buffered channel, large enough for every request the
// round may send: node callbacks never block.
type round struct {
	p       *pool
	ctx     context.Context //nolint:containedctx // the caller's values, for the requests it sends
	report  reportFunc
	start   time.Time
	timeout time.Duration
	votes   chan vote
	t       *tally
	// replies keeps each node's reply, when the caller reads them all
	// (see keepReplies); nil otherwise.
	replies []node.Reply
	// grants decides whether a reply counts as a grant (nil: rep.OK).
	grants granter
	// hook sees every reply first, on the node's goroutine (nil: none).
	hook hook
	// oweFor, when positive, keeps a release that could not be delivered
	// for the node to receive later, for that long (see pool.owe).
	oweFor time.Duration
	// quiet rounds ask the nodes without the pool learning from the
	// answers, and ask down nodes too (see pool.ask).
	quiet bool
}

// granter decides whether node i's reply counts as a grant.
type granter interface {
	grants(i int, rep node.Reply) bool
}

// hook sees node i's reply first, on the node's goroutine.
type hook interface {
	heard(i int, rep node.Reply)
}

// newRound starts a round over p: nothing is sent yet. capacity bounds the
// requests it may send (N, or more with re-asks).
func newRound(ctx context.Context, p *pool, timeout time.Duration, report reportFunc, capacity int) *round {
	return &round{
		p: p, ctx: context.WithoutCancel(ctx), report: report, start: p.now(), timeout: timeout,
		votes: make(chan vote, capacity), t: newTally(p.size()),
	}
}

// needs makes the round's tally count against quorum q instead of a
// majority; 0 keeps the majority.
func (rd *round) needs(q int) *round {
	if q > 0 {
		rd.t.quorum = q
	}
	return rd
}

// keepReplies makes the round keep every node's reply.
func (rd *round) keepReplies() *round {
	rd.replies = make([]node.Reply, rd.p.size())
	return rd
}

// sendAll sends op to every node, each once its gate opens (gates may be
// nil), where only(i) allows (nil: every node), asked when the gate opens;
// a node left out votes that it was skipped.
func (rd *round) sendAll(op node.Op, gates []*gate, only func(int) bool) *round {
	for i := range rd.p.size() {
		var g *gate
		if gates != nil {
			g = gates[i]
		}
		rd.post(i, op, g, only, false, false)
	}
	return rd
}

// post sends op to node i once g opens (nil: no gate), unless only(i)
// then says no (the node votes skipped). Its reply
// becomes a vote, marked again for a re-ask. A request that enters g holds
// back what goes through g after it until its reply.
func (rd *round) post(i int, op node.Op, g *gate, only func(int) bool, again, enter bool) {
	q := &request{rd: rd, i: i, op: op, g: g, only: only, again: again, enter: enter}
	if g == nil {
		q.run()
		return
	}
	g.then(q)
}

// request is one operation on its way to one node: through its gate, then
// to the pool; it turns the reply into a vote. One value carries it
// through both stages, so that waiting costs neither a goroutine nor a
// closure.
type request struct {
	rd           *round
	i            int
	op           node.Op
	g            *gate
	only         func(int) bool
	again, enter bool
}

// run sends the request: its gate opened.
func (q *request) run() {
	rd := q.rd
	if q.enter {
		q.g.enter()
	}
	if q.only != nil && !q.only(q.i) {
		rd.votes <- vote{node: q.i, rep: node.Reply{Err: errSkipped}}
		return
	}
	rd.dispatch(q.i, q.op, q)
}

// receive turns the reply into a vote, on the node's goroutine.
func (q *request) receive(rep node.Reply) {
	rd := q.rd
	rd.replied(q.i, q.op, rep)
	rd.votes <- vote{node: q.i, rep: rep, again: q.again}
	if q.enter {
		q.g.leave()
	}
}

// dispatch hands op for node i to the pool.
func (rd *round) dispatch(i int, op node.Op, done receiver) {
	if rd.quiet {
		rd.p.ask(rd.ctx, i, rd.timeout, op, done)
		return
	}
	rd.p.send(rd.ctx, i, rd.timeout, op, rd.report, done)
}

// replied runs on the node's goroutine when a reply comes in: a release
// that could not be delivered is owed to the node, and the hook sees it.
func (rd *round) replied(i int, op node.Op, rep node.Reply) {
	if o, ok := op.(owable); ok && rd.oweFor > 0 && o.Owable(rep.Err) {
		rd.p.owe(i, o, rd.oweFor)
	}
	if rd.hook != nil {
		rd.hook.heard(i, rep)
	}
}

// rule is what the vote loop asks of a round's decision rule.
type rule interface {
	take(v vote) bool        // count a vote; true when the outcome is certain
	timer() <-chan time.Time // an extra wake-up, nil for none
	tick() bool              // the extra wake-up fired; true when certain
	stop()                   // the loop is done
}

// add counts v in the tally, and keeps the reply when asked to.
func (rd *round) add(v vote) {
	ok := v.rep.OK
	if rd.grants != nil {
		ok = rd.grants.grants(v.node, v.rep)
	}
	if rd.replies != nil && rd.t.answers[v.node] == pending {
		rd.replies[v.node] = v.rep
	}
	rd.t.add(v.node, ok && v.rep.Err == nil, v.rep.Err)
}

// quorumRule decides a round as soon as a quorum granted or no quorum can:
// fence, release and extend.
type quorumRule struct{ rd *round }

func (q quorumRule) take(v vote) bool {
	q.rd.add(v)
	return q.rd.t.decided()
}
func (quorumRule) timer() <-chan time.Time { return nil }
func (q quorumRule) tick() bool            { return q.rd.t.decided() }
func (quorumRule) stop()                   {}

// everyRule waits for every node: inspect, forced release, identify, the
// waiters' queues.
type everyRule struct{ rd *round }

func (e everyRule) take(v vote) bool {
	e.rd.add(v)
	return e.rd.t.pending() == 0
}
func (everyRule) timer() <-chan time.Time { return nil }
func (e everyRule) tick() bool            { return e.rd.t.pending() == 0 }
func (everyRule) stop()                   {}

// decide runs the round's plain rule: a quorum either way.
func (rd *round) decide(ctx context.Context) error { return rd.collect(ctx, quorumRule{rd}) }

// gather waits for every node.
func (rd *round) gather(ctx context.Context) error { return rd.collect(ctx, everyRule{rd}) }

// collect is the vote loop: it feeds votes to r until the outcome is
// certain, the node timeout passes, or ctx ends, whose error it then
// returns (joined with its cause).
func (rd *round) collect(ctx context.Context, r rule) error {
	defer r.stop()
	timer := time.NewTimer(rd.timeout - rd.p.now().Sub(rd.start))
	defer timer.Stop()
	for {
		select {
		case v := <-rd.votes:
			if r.take(v) {
				return nil
			}
		case <-r.timer():
			if r.tick() {
				return nil
			}
		case <-timer.C:
			rd.timedOut()
			return nil
		case <-ctx.Done():
			return rd.ended(ctx)
		}
	}
}

// timedOut counts every node still silent at the node timeout as failed.
func (rd *round) timedOut() {
	for i, a := range rd.t.answers {
		switch {
		case a != pending:
		case rd.quiet:
			rd.add(vote{node: i, rep: node.Reply{Err: node.ErrNodeTimeout}})
		default:
			rd.add(vote{node: i, rep: node.Reply{Err: rd.p.timedOut(i, rd.start)}})
		}
	}
}

// ended returns the error of a round whose caller's ctx ended; the nodes
// still silent keep ctx's error as their reply.
func (rd *round) ended(ctx context.Context) error {
	err := ctx.Err()
	if rd.replies != nil {
		for i, a := range rd.t.answers {
			if a == pending {
				rd.replies[i].Err = err
			}
		}
	}
	if cause := context.Cause(ctx); !errors.Is(err, cause) {
		err = errors.Join(err, cause)
	}
	return err
}

// linger collects the replies still due, for at most d (and never past
// the node timeout), after the outcome was decided.
func (rd *round) linger(d time.Duration) {
	if rd.t.pending() == 0 {
		return
	}
	d = min(d, rd.timeout-rd.p.now().Sub(rd.start))
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for rd.t.pending() > 0 {
		select {
		case v := <-rd.votes:
			rd.add(v)
		case <-timer.C:
			return
		}
	}
}

// lingerAsLongAgain lingers as long again as the round took so far.
func (rd *round) lingerAsLongAgain() { rd.linger(asLongAgain(rd.p.now().Sub(rd.start))) }

// waitFor waits, at most timeout, for the votes of the given nodes.
func (rd *round) waitFor(nodes []int, timeout time.Duration) {
	if len(nodes) == 0 || timeout <= 0 {
		return
	}
	want := make(map[int]bool, len(nodes))
	for _, i := range nodes {
		want[i] = true
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for len(want) > 0 {
		select {
		case v := <-rd.votes:
			delete(want, v.node)
		case <-timer.C:
			return
		}
	}
}
