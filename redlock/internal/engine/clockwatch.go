package engine

import (
	"context"
	"fmt"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/redlock-go/redlock/internal/node"
)

// watchClocks reads every node's clock each clockWatchEvery while this
// process holds a lease, so that a jump is found (and the leases that
// counted the node recompute) even when nothing else is sent. It stops
// when no lease is held, or at close; record starts it again.
func (e *Engine) watchClocks() {
	defer e.WG.Done()
	for e.Sleep(quorum.ClockWatchEvery) {
		e.leasesMu.Lock()
		if len(e.leases) == 0 {
			e.watching = false
			e.leasesMu.Unlock()
			return
		}
		e.leasesMu.Unlock()
		// Not waited for: the pool counts them, and close waits for
		// them as for any call in flight (a silent node's client may hold
		// one for its read timeout).
		for i := range e.Pool.Size() {
			e.Pool.Send(context.Background(), i, quorum.ProbeTimeout, node.Clock{}, nil, quorum.ReceiveFunc(func(node.Reply) {}))
		}
	}
	e.leasesMu.Lock()
	e.watching = false
	e.leasesMu.Unlock()
}

// clockJumped makes every lease that counted node i's vote, before the
// jump just found on its clock, recompute what it holds: the node may have
// expired its key already. A lease left with fewer such nodes than its
// quorum is lost, with a cause that names the clock.
func (e *Engine) clockJumped(i int) {
	jumps := e.Guard.JumpsOf()
	e.leasesMu.Lock()
	var lost []func()
	for l, h := range e.leases {
		kept := 0
		for _, v := range l.voters {
			if jumps[v] == l.jumps[v] {
				kept++
			}
		}
		if l.voters == nil || kept >= h.quorumOf() {
			continue
		}
		cause := fmt.Errorf("%w: %w: node %d's clock jumped; %d of the %d nodes that granted it still may hold it, quorum %d",
			ErrLockLost, quorum.ErrClockJump, i, kept, len(l.voters), h.quorumOf())
		lost = append(lost, func() { h.end(l, cause) })
	}
	e.leasesMu.Unlock()
	for _, end := range lost {
		end() // end takes the holder's lock and forgets the lease: not under leasesMu
	}
}

// quorumOf is how many nodes must hold h's lease.
func (h *Holder) quorumOf() int {
	if h.Quorum > 0 {
		return h.Quorum
	}
	return quorum.Majority(h.Engine.Pool.Size())
}
