package engine

import (
	"context"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/redlock-go/redlock/internal/node"
)

// watchClocks reads every node's clock each clockWatchEvery while this
// process holds a lease, so that a jump is found (and the leases that
// counted the node recompute) even when nothing else is sent. It stops
// when no lease is held, or at close; record starts it again.
func (e *Engine) watchClocks() {
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

// clockJumped makes every lease held recompute what it holds, now that
// node i's clock jumped: the node may have expired its key already. The
// leases lost end, each with its cause.
func (e *Engine) clockJumped(i int) {
	jumps := e.Guard.JumpsOf()
	e.leasesMu.Lock()
	var lost []Held
	var causes []error
	for h := range e.leases {
		if cause := h.Jumped(i, jumps); cause != nil {
			lost, causes = append(lost, h), append(causes, cause)
		}
	}
	e.leasesMu.Unlock()
	for k, h := range lost {
		h.End(causes[k]) // End takes the holder's lock and forgets the lease: not under leasesMu
	}
}
