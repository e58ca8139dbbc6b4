package quorum

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

// Vote is one node's reply to one request of a round.
type Vote struct {
	node  int
	rep   node.Reply
	again bool // the reply to a re-ask
}

// Round is one request sent to every node, and the votes coming back.
// Votes arrive on a buffered channel, large enough for every request the
// round may send: node callbacks never block.
type Round struct {
	p       *Pool
	ctx     context.Context //nolint:containedctx // the caller's values, for the requests it sends
	report  ReportFunc
	Start   time.Time
	timeout time.Duration
	votes   chan Vote
	Tally   *Tally
	// Replies keeps each node's reply, when the caller reads them all
	// (see keepReplies); nil otherwise.
	Replies []node.Reply
	// Grants decides whether a reply counts as a grant (nil: rep.OK).
	Grants Granter
	// Hook sees every reply first, on the node's goroutine (nil: none).
	Hook Hook
	// OweFor, when positive, keeps a release that could not be delivered
	// for the node to receive later, for that long (see pool.owe).
	OweFor time.Duration
	// Quiet rounds ask the nodes without the pool learning from the
	// answers, and ask down nodes too (see pool.ask).
	Quiet bool
	// first holds the first request to each node, all in one allocation
	// (see Post).
	first []request
}

// Granter decides whether node i's reply counts as a grant.
type Granter interface {
	Grants(i int, rep node.Reply) bool
}

// Hook sees node i's reply first, on the node's goroutine.
type Hook interface {
	Heard(i int, rep node.Reply)
}

// NewRound starts a round over p: nothing is sent yet. capacity bounds the
// requests it may send (N, or more with re-asks).
func NewRound(ctx context.Context, p *Pool, timeout time.Duration, report ReportFunc, capacity int) *Round {
	return &Round{
		p: p, ctx: context.WithoutCancel(ctx), report: report, Start: p.now(), timeout: timeout,
		votes: make(chan Vote, capacity), Tally: newTally(p.Size()), first: make([]request, p.Size()),
	}
}

// Needs makes the round's tally count against quorum q instead of a
// majority; 0 keeps the majority.
func (rd *Round) Needs(q int) *Round {
	if q > 0 {
		rd.Tally.Majority = q
	}
	return rd
}

// KeepReplies makes the round keep every node's reply.
func (rd *Round) KeepReplies() *Round {
	rd.Replies = make([]node.Reply, rd.p.Size())
	return rd
}

// SendAll sends op to every node, each once its gate opens (gates may be
// nil), where only(i) allows (nil: every node), asked when the gate opens;
// a node left out votes that it was skipped.
func (rd *Round) SendAll(op node.Op, gates []*Gate, only func(int) bool) *Round {
	for i := range rd.p.Size() {
		var g *Gate
		if gates != nil {
			g = gates[i]
		}
		rd.Post(i, op, g, only, false, false)
	}
	return rd
}

// Post sends op to node i once g opens (nil: no gate), unless only(i)
// then says no (the node votes skipped). Its reply
// becomes a vote, marked again for a re-ask. A request that enters g holds
// back what goes through g after it until its reply.
func (rd *Round) Post(i int, op node.Op, g *Gate, only func(int) bool, again, enter bool) {
	var q *request
	if !again && rd.first[i].rd == nil {
		q = &rd.first[i] // a round's first request to each node: one allocation for them all
	} else {
		q = new(request)
	}
	*q = request{rd: rd, i: i, op: op, g: g, only: only, again: again, enter: enter}
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
	rd           *Round
	i            int
	op           node.Op
	g            *Gate
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
		rd.votes <- Vote{node: q.i, rep: node.Reply{Err: errSkipped}}
		return
	}
	rd.dispatch(q.i, q.op, q)
}

// receive turns the reply into a vote, on the node's goroutine.
func (q *request) receive(rep node.Reply) {
	rd := q.rd
	rd.replied(q.i, q.op, rep)
	rd.votes <- Vote{node: q.i, rep: rep, again: q.again}
	if q.enter {
		q.g.leave()
	}
}

// dispatch hands op for node i to the pool.
func (rd *Round) dispatch(i int, op node.Op, done receiver) {
	if rd.Quiet {
		rd.p.ask(rd.ctx, i, rd.timeout, op, done)
		return
	}
	rd.p.Send(rd.ctx, i, rd.timeout, op, rd.report, done)
}

// replied runs on the node's goroutine when a reply comes in: a release
// that could not be delivered is owed to the node, and the hook sees it.
func (rd *Round) replied(i int, op node.Op, rep node.Reply) {
	if o, ok := op.(owable); ok && rd.OweFor > 0 && o.Owable(rep.Err) {
		rd.p.owe(i, o, rd.OweFor)
	}
	if rd.Hook != nil {
		rd.Hook.Heard(i, rep)
	}
}

// Rule is what the vote loop asks of a round's decision rule.
type Rule interface {
	Take(v Vote) bool        // count a vote; true when the outcome is certain
	Timer() <-chan time.Time // an extra wake-up, nil for none
	Tick() bool              // the extra wake-up fired; true when certain
	// Handoffs is where nodes' handoffs of the lock to the round's token
	// arrive (nil for none: see Attempt.Handoff), and Handoff counts one;
	// true when the outcome is certain.
	Handoffs() <-chan node.Handed
	Handoff(h node.Handed) bool
	Stop() // the loop is done
}

// Add counts v in the tally, and keeps the reply when asked to.
func (rd *Round) Add(v Vote) {
	ok := v.rep.OK
	if rd.Grants != nil {
		ok = rd.Grants.Grants(v.node, v.rep)
	}
	if rd.Replies != nil && rd.Tally.Answers[v.node] == pending {
		rd.Replies[v.node] = v.rep
	}
	rd.Tally.add(v.node, ok && v.rep.Err == nil, v.rep.Err)
}

// quorumRule decides a round as soon as a quorum granted or no quorum can:
// fence, release and extend.
type quorumRule struct{ rd *Round }

func (q quorumRule) Take(v Vote) bool {
	q.rd.Add(v)
	return q.rd.Tally.decided()
}
func (quorumRule) Timer() <-chan time.Time      { return nil }
func (quorumRule) Handoffs() <-chan node.Handed { return nil }
func (quorumRule) Handoff(node.Handed) bool     { return false }
func (q quorumRule) Tick() bool                 { return q.rd.Tally.decided() }
func (quorumRule) Stop()                        {}

// everyRule waits for every node: inspect, forced release, identify, the
// waiters' queues.
type everyRule struct{ rd *Round }

func (e everyRule) Take(v Vote) bool {
	e.rd.Add(v)
	return e.rd.Tally.Pending() == 0
}
func (everyRule) Timer() <-chan time.Time      { return nil }
func (everyRule) Handoffs() <-chan node.Handed { return nil }
func (everyRule) Handoff(node.Handed) bool     { return false }
func (e everyRule) Tick() bool                 { return e.rd.Tally.Pending() == 0 }
func (everyRule) Stop()                        {}

// Decide runs the round's plain rule: a quorum either way.
func (rd *Round) Decide(ctx context.Context) error { return rd.Collect(ctx, quorumRule{rd}) }

// Gather waits for every node.
func (rd *Round) Gather(ctx context.Context) error { return rd.Collect(ctx, everyRule{rd}) }

// Collect is the vote loop: it feeds votes to r until the outcome is
// certain, the node timeout passes, or ctx ends, whose error it then
// returns (joined with its cause).
func (rd *Round) Collect(ctx context.Context, r Rule) error {
	defer r.Stop()
	timer := time.NewTimer(rd.timeout - rd.p.now().Sub(rd.Start))
	defer timer.Stop()
	for {
		select {
		case v := <-rd.votes:
			if r.Take(v) {
				return nil
			}
		case <-r.Timer():
			if r.Tick() {
				return nil
			}
		case h := <-r.Handoffs():
			if r.Handoff(h) {
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
func (rd *Round) timedOut() {
	for i, a := range rd.Tally.Answers {
		switch {
		case a != pending:
		case rd.Quiet:
			rd.Add(Vote{node: i, rep: node.Reply{Err: node.ErrNodeTimeout}})
		default:
			rd.Add(Vote{node: i, rep: node.Reply{Err: rd.p.timedOut(i, rd.Start)}})
		}
	}
}

// ended returns the error of a round whose caller's ctx ended; the nodes
// still silent keep ctx's error as their reply.
func (rd *Round) ended(ctx context.Context) error {
	err := ctx.Err()
	if rd.Replies != nil {
		for i, a := range rd.Tally.Answers {
			if a == pending {
				rd.Replies[i].Err = err
			}
		}
	}
	if cause := context.Cause(ctx); !errors.Is(err, cause) {
		err = errors.Join(err, cause)
	}
	return err
}

// Linger collects the replies still due, for at most d (and never past
// the node timeout), after the outcome was decided.
func (rd *Round) Linger(d time.Duration) {
	if rd.Tally.Pending() == 0 {
		return
	}
	d = min(d, rd.timeout-rd.p.now().Sub(rd.Start))
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for rd.Tally.Pending() > 0 {
		select {
		case v := <-rd.votes:
			rd.Add(v)
		case <-timer.C:
			return
		}
	}
}

// LingerAsLongAgain lingers as long again as the round took so far.
func (rd *Round) LingerAsLongAgain() { rd.Linger(AsLongAgain(rd.p.now().Sub(rd.Start))) }

// WaitFor waits, at most timeout, for the votes of the given nodes.
func (rd *Round) WaitFor(nodes []int, timeout time.Duration) {
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
