package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-go/redlock/internal/identity"
	"github.com/redlock-go/redlock/internal/node"
)

// Node identities. Each node must be its own Redis master (or cluster):
// a quorum counted on two clients of the same servers would count those
// servers twice, and one of them could grant a quorum on its own. New does
// no I/O, so it catches only a client given twice and two clients with the
// same address; two cluster clients seeded with different members, or two
// Sentinel-managed clients of one master, look different there.
//
// So the first acquisition of a Redlock asks every node who it is, at the
// same time as it asks for the lock: INFO's run_id, unique to a server
// process, of each server behind the node (see internal/identity). Once a
// quorum granted, it waits for the answers until a quorum of nodes has
// answered and then as long again for the others (a silent or far
// minority must not cost it a node timeout), and at most until its node
// timeout; the nodes that granted answered the lock's request, so their
// INFO comes about as fast. Acquisitions that start meanwhile wait as
// long. The rest of the answers are collected in the background, nodes
// that have not answered are asked again at growing intervals, and any
// node again whenever it comes back after being down. Two nodes that share
// a server make every later acquisition fail with an error wrapping
// ErrInvalidArgument: a deployment error, which no retry can change. A
// node whose user may not run INFO cannot tell, and is taken as distinct.
// Nodes too slow for the first acquisition's wait could still count twice
// in it: two clients of one server are seldom that different in speed.
//
// The identities also vouch for releases that find their key gone (see
// Redlock.release): the run id of the server that answered must be one
// the node was asked for before the lease began. Run ids are never
// reused, so that server ran from its answer to the release; the first
// acquisition asks at its start, which leaves one window: a restart
// between the execution of the lock's SET and that of INFO, within the
// first acquisition's round trip, is not seen.

// identifyMax bounds the interval between two tries to identify the
// nodes that have not answered.
const identifyMax = 30 * time.Second

// identifyFirst starts asking every node who it is when this is the
// Redlock's first acquisition, and returns the round; nil otherwise.
func (e *engine) identifyFirst() *round {
	if !e.ids.Begin() {
		return nil
	}
	return e.askIdentities(nil)
}

// askIdentities sends Identify to the given nodes (nil: every node).
func (e *engine) askIdentities(nodes []int) *round {
	rd := newRound(context.Background(), e.pool, probeTimeout, nil, e.pool.size()).keepReplies()
	rd.quiet = true // identification says nothing of a node's health
	if nodes == nil {
		return rd.sendAll(node.Identify{}, nil, nil)
	}
	ask := make([]bool, e.pool.size())
	for _, i := range nodes {
		ask[i] = true
	}
	return rd.sendAll(node.Identify{}, nil, func(i int) bool { return ask[i] })
}

// identified waits, for the first acquisitions only, for the nodes'
// identities: the first one (idr is its round) until all answered, or a
// quorum did and then as long again as that took since start, and at most
// until deadline; those that started meanwhile until the first is done,
// and at most until deadline. It returns the error of nodes found to share
// a server.
func (e *engine) identified(idr *round, start, deadline time.Time) error {
	if idr == nil {
		e.settled(deadline)
		return e.idErr()
	}
	ctx, cancel := context.WithDeadline(e.life, deadline) // Close cuts the wait short
	if idr.collect(ctx, answeredRule{idr}) == nil {
		idr.linger(min(asLongAgain(e.now().Sub(start)), time.Until(deadline)))
	}
	cancel()
	e.recordIdentities(idr)
	e.ids.Settle()
	e.identifyLater(idr)
	return e.idErr()
}

// settled waits until the first acquisition's wait for identities is
// over, at most until deadline.
func (e *engine) settled(deadline time.Time) {
	select {
	case <-e.ids.Settled():
		return
	default:
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-e.ids.Settled():
	case <-timer.C:
	case <-e.done:
	}
}

// idErr is the error of nodes found to share a server.
func (e *engine) idErr() error {
	if err := e.ids.Err(); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// answeredRule waits for a quorum of answers, whatever they say.
type answeredRule struct{ rd *round }

func (a answeredRule) take(v vote) bool {
	a.rd.add(v)
	return a.rd.t.n-a.rd.t.pending() >= a.rd.t.quorum
}
func (answeredRule) timer() <-chan time.Time { return nil }
func (a answeredRule) tick() bool            { return a.rd.t.pending() == 0 }
func (answeredRule) stop()                   {}

// identifyLater hands idr, the first round of identities (nil: none), to
// the background: its remaining answers are collected, and the nodes that
// have not answered are asked again until each has, the Redlock closes,
// or two nodes are found to share a server.
func (e *engine) identifyLater(idr *round) {
	if idr == nil {
		return
	}
	if e.track(1) != nil {
		e.ids.Settle()
		return
	}
	go func() {
		defer e.wg.Done()
		defer e.ids.Settle()
		wait := time.Second
		for {
			e.gatherIdentities(idr)
			e.ids.Settle()
			missing := e.ids.Missing()
			if len(missing) == 0 || e.ids.Err() != nil || !e.sleep(wait) {
				return
			}
			wait = min(2*wait, identifyMax)
			idr = e.askIdentities(missing)
		}
	}()
}

// gatherIdentities collects every answer of idr (until the probe timeout,
// or Close) and records them.
func (e *engine) gatherIdentities(idr *round) {
	_ = idr.gather(e.life)
	e.recordIdentities(idr)
}

// recordIdentities records the answers idr has so far: a node's run ids,
// or that it cannot tell (an error reply: INFO refused). A node that was
// not reached is left to be asked again.
func (e *engine) recordIdentities(idr *round) {
	sent := idr.start
	for i, a := range idr.t.answers {
		if a != granted && a != failed {
			continue
		}
		rep := idr.replies[i]
		switch err := rep.Err; {
		case err == nil:
			ids, _ := rep.Value.([]string)
			e.ids.Record(i, identity.Answer{IDs: ids}, sent, e.pool.addr)
		case node.Unreachable(err), node.Unsent(err), errors.Is(err, node.ErrNodeTimeout):
		default:
			if errors.Is(err, node.ErrMisconfigured) {
				e.featureOff(i, FeatureIdentify, err)
			}
			e.ids.Record(i, identity.Answer{Unknown: true}, sent, e.pool.addr)
		}
	}
}

// reidentify asks node i again who it is, in the background: it came back
// after being down, and may be another server now (a Sentinel failover).
// Called from a goroutine counted in the pool.
func (e *engine) reidentify(i int) {
	select {
	case <-e.ids.Settled():
	default:
		return // the first round is still out: it asks again by itself
	}
	if e.track(1) != nil {
		return
	}
	go func() {
		defer e.wg.Done()
		e.gatherIdentities(e.askIdentities([]int{i}))
	}()
}
