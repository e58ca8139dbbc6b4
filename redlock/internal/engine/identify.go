package engine

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/redlock-go/redlock/internal/identity"
	"github.com/redlock-go/redlock/internal/jitter"
	"github.com/redlock-go/redlock/internal/life"
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

// identifier asks the nodes who they are, and keeps their answers (reg).
// It owns the goroutines that ask again in the background; close stops
// them and waits for them.
type identifier struct {
	pool *quorum.Pool
	Reg  *identity.Registry
	now  quorum.Clock
	// off turns a feature off on a node that refused it for good.
	off func(i int, feature string, err error)

	group life.Group         // the goroutines that ask
	life  context.Context    //nolint:containedctx // the identifier's lifetime, not a call's
	kill  context.CancelFunc // ends life
}

func newIdentifier(p *quorum.Pool, now quorum.Clock, off func(int, string, error)) *identifier {
	id := &identifier{pool: p, Reg: identity.New(p.Size()), now: now, off: off}
	id.life, id.kill = context.WithCancel(context.Background())
	return id
}

// track counts one more background goroutine, unless closed.
func (id *identifier) track() error {
	if !id.group.Enter() {
		return ErrClosed
	}
	return nil
}

// Close stops asking and waits, until ctx ends, for the goroutines that
// ask; a question in flight ends at its probe timeout at the latest.
func (id *identifier) Close(ctx context.Context) error {
	if id.group.Stop() {
		id.kill()
	}
	return id.group.Wait(ctx)
}

// identifyMax bounds the interval between two tries to identify the
// nodes that have not answered.
const identifyMax = 30 * time.Second

// first starts asking every node who it is when this is the
// Redlock's first acquisition, and returns the round; nil otherwise.
func (id *identifier) first() *quorum.Round {
	if !id.Reg.Begin() {
		return nil
	}
	return id.ask(nil)
}

// ask sends Identify to the given nodes (nil: every node).
func (id *identifier) ask(nodes []int) *quorum.Round {
	rd := quorum.NewRound(context.Background(), id.pool, quorum.ProbeTimeout, nil, id.pool.Size()).KeepReplies()
	rd.Quiet = true // identification says nothing of a node's health
	if nodes == nil {
		return rd.SendAll(node.Identify{}, nil, nil)
	}
	ask := make([]bool, id.pool.Size())
	for _, i := range nodes {
		ask[i] = true
	}
	return rd.SendAll(node.Identify{}, nil, func(i int) bool { return ask[i] })
}

// distinct checks, for an attempt that a quorum granted, that no two of
// the nodes are the same server (see wait); idr is the first round of
// identities, nil unless this is the first acquisition. An attempt that
// failed hands idr to the background.
func (id *identifier) distinct(idr *quorum.Round, won bool, start, deadline time.Time) error {
	if !won {
		id.later(idr)
		return nil
	}
	return id.wait(idr, start, deadline)
}

// wait waits, for the first acquisitions only, for the nodes'
// identities: the first one (idr is its round) until all answered, or a
// quorum did and then as long again as that took since start, and at most
// until deadline; those that started meanwhile until the first is done,
// and at most until deadline. It returns the error of nodes found to share
// a server.
func (id *identifier) wait(idr *quorum.Round, start, deadline time.Time) error {
	if idr == nil {
		id.settled(deadline)
		return id.err()
	}
	ctx, cancel := context.WithDeadline(id.life, deadline) // Close cuts the wait short
	if idr.Collect(ctx, answeredRule{idr}) == nil {
		idr.Linger(min(quorum.AsLongAgain(id.now().Sub(start)), deadline.Sub(id.now())))
	}
	cancel()
	id.record(idr)
	id.Reg.Settle()
	id.later(idr)
	return id.err()
}

// Distinct is the identity rule for votes that no attempt counted (a
// waiter handed the lock over, see internal/turn): it waits, at most
// until deadline, until the first acquisition's wait for the nodes'
// identities is over, and returns the error of nodes found to share a
// server, as every attempt does, so that no server's vote counts twice.
func (e *Engine) Distinct(deadline time.Time) error { return e.IDs.wait(nil, time.Time{}, deadline) }

// settled waits until the first acquisition's wait for identities is
// over, at most until deadline.
func (id *identifier) settled(deadline time.Time) {
	select {
	case <-id.Reg.Settled():
		return
	default:
	}
	timer := time.NewTimer(deadline.Sub(id.now()))
	defer timer.Stop()
	select {
	case <-id.Reg.Settled():
	case <-timer.C:
	case <-id.group.Closing():
	}
}

// err is the error of nodes found to share a server.
func (id *identifier) err() error {
	if err := id.Reg.Err(); err != nil {
		return Invalid("%v", err)
	}
	return nil
}

// answeredRule waits for a quorum of answers, whatever they say.
type answeredRule struct{ rd *quorum.Round }

func (a answeredRule) Take(v quorum.Vote) bool {
	a.rd.Add(v)
	return a.rd.Tally.N-a.rd.Tally.Pending() >= a.rd.Tally.Majority
}
func (answeredRule) Timer() <-chan time.Time      { return nil }
func (answeredRule) Handoffs() <-chan node.Handed { return nil }
func (answeredRule) Handoff(node.Handed) bool     { return false }
func (a answeredRule) Tick() bool                 { return a.rd.Tally.Pending() == 0 }
func (answeredRule) Stop()                        {}

// later hands idr, the first round of identities (nil: none), to
// the background: its remaining answers are collected, and the nodes that
// have not answered are asked again until each has, the Redlock closes,
// or two nodes are found to share a server.
func (id *identifier) later(idr *quorum.Round) {
	if idr == nil {
		return
	}
	if id.track() != nil {
		id.Reg.Settle()
		return
	}
	go func() {
		defer id.group.Done()
		defer id.Reg.Settle()
		backoff := jitter.Backoff{Lo: time.Second, Hi: identifyMax}
		for try := 1; ; try++ {
			id.gather(idr)
			id.Reg.Settle()
			missing := id.Reg.Missing()
			if len(missing) == 0 || id.Reg.Err() != nil || !jitter.Sleep(backoff.Delay(try), id.group.Closing()) {
				return
			}
			idr = id.ask(missing)
		}
	}()
}

// gather collects every answer of idr (until the probe timeout,
// or Close) and records them.
func (id *identifier) gather(idr *quorum.Round) {
	_ = idr.Gather(id.life)
	id.record(idr)
}

// record records the answers idr has so far: a node's run ids,
// or that it cannot tell (an error reply: INFO refused). A node that was
// not reached is left to be asked again.
func (id *identifier) record(idr *quorum.Round) {
	sent := idr.Start
	for i, a := range idr.Tally.Answers {
		if a != quorum.Granted && a != quorum.Failed {
			continue
		}
		rep := idr.Replies[i]
		switch err := rep.Err; {
		case err == nil:
			ids, _ := rep.Value.([]string)
			id.Reg.Record(i, identity.Answer{IDs: ids}, sent, id.pool.Addr)
		case node.Unreachable(err), node.Unsent(err), errors.Is(err, node.ErrNodeTimeout):
		default:
			// A wrong password refuses every command, not INFO: each
			// acquisition names it.
			if errors.Is(err, node.ErrMisconfigured) && !node.AuthFailure(err) {
				id.off(i, FeatureIdentify, err)
			}
			id.Reg.Record(i, identity.Answer{Unknown: true}, sent, id.pool.Addr)
		}
	}
}

// again asks node i again who it is, in the background: it came back
// after being down, and may be another server now (a Sentinel failover).
// Called from a goroutine counted in the pool.
func (id *identifier) again(i int) {
	select {
	case <-id.Reg.Settled():
	default:
		return // the first round is still out: it asks again by itself
	}
	if id.track() != nil {
		return
	}
	go func() {
		defer id.group.Done()
		id.gather(id.ask([]int{i}))
	}()
}
