package quorum

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// A round whose request carries many operations (node.Extensions: the
// extensions of renewal that fell due together): each node's reply holds
// one reply per operation, and each operation is tallied on its own, as
// if its own round had asked the nodes. The round is decided when every
// operation's outcome is certain.

// Each returns the reply of operation j of a request that carries many
// (node.Extensions), in rep, the node's reply to the whole request: the
// node's failure when the request failed, else the operation's own, its
// error classified as the pool classifies a reply's.
func Each(rep node.Reply, j int) node.Reply {
	if rep.Err != nil {
		return node.Reply{Err: rep.Err}
	}
	each, _ := rep.Value.([]node.Reply)
	if j >= len(each) {
		return node.Reply{Err: node.ErrNodeTimeout}
	}
	r := each[j]
	if r.Err != nil {
		r.Err = node.Classify(node.ClientErr(r.Err))
	}
	return r
}

// NewTally returns the tally of one operation over n nodes, which needs q
// of them (0: a majority).
func NewTally(n, q int) *Tally {
	t := newTally(n)
	if q > 0 {
		t.Majority = q
	}
	return t
}

// eachRule decides a round that carries many operations once each one's
// tally is decided.
type eachRule struct {
	rd      *Round
	tallies []*Tally
	open    int // operations not decided yet
}

func (e *eachRule) Take(v Vote) bool {
	e.rd.Add(v)
	for j, t := range e.tallies {
		was := t.decided()
		r := Each(v.rep, j)
		t.add(v.node, r.OK && r.Err == nil, r.Err)
		if !was && t.decided() {
			e.open--
		}
	}
	return e.open == 0
}
func (*eachRule) Timer() <-chan time.Time      { return nil }
func (*eachRule) Handoffs() <-chan node.Handed { return nil }
func (*eachRule) Handoff(node.Handed) bool     { return false }
func (e *eachRule) Tick() bool                 { return e.open == 0 }
func (*eachRule) Stop()                        {}

// DecideEach runs a round that carries many operations, tallied each in
// tallies (see NewTally), until every one is decided, the node timeout
// passes (a node silent then counts as failed in every tally) or ctx
// ends.
func (rd *Round) DecideEach(ctx context.Context, tallies []*Tally) error {
	e := &eachRule{rd: rd, tallies: tallies, open: len(tallies)}
	err := rd.Collect(ctx, e)
	for _, f := range rd.Tally.Failures {
		for _, t := range tallies {
			t.add(f.Node, false, f.Err) // the node timeout's (a tally keeps a node's first answer)
		}
	}
	return err
}

// LingerEach collects the replies still due into every tally, for at most
// d (and never past the node timeout), after the round was decided: a
// failed operation's error then counts what the nodes did (see
// engine's settle).
func (rd *Round) LingerEach(d time.Duration, tallies []*Tally) {
	if rd.Tally.Pending() == 0 {
		return
	}
	d = min(d, rd.timeout-rd.p.now().Sub(rd.Start))
	if d <= 0 {
		return
	}
	e := &eachRule{rd: rd, tallies: tallies}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for rd.Tally.Pending() > 0 {
		select {
		case v := <-rd.votes:
			e.Take(v)
		case <-timer.C:
			return
		}
	}
}
