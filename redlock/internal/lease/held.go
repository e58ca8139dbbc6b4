package lease

import (
	"fmt"

	"github.com/redlock-go/redlock/redlock/internal/engine"

	"github.com/redlock-go/redlock/redlock/internal/quorum"
)

// A Lease is what the engine keeps of it: an engine.Held, which ends it
// through its holder.

// End implements engine.Held.
func (l *Lease) End(cause error) { l.holder.end(l, cause) }

// Jumped implements engine.Held: a lease that counted node i's vote before the
// jump, left with fewer such nodes than its quorum, is lost, with a cause
// that names the clock.
func (l *Lease) Jumped(i int, jumps []int) error {
	h := l.holder
	kept := 0
	for _, v := range l.voters {
		if jumps[v] == l.jumps[v] {
			kept++
		}
	}
	if l.voters == nil || kept >= h.quorumOf() {
		return nil
	}
	return fmt.Errorf("%w: %w: node %d's clock jumped; %d of the %d nodes that granted it still may hold it, quorum %d",
		engine.ErrLockLost, quorum.ErrClockJump, i, kept, len(l.voters), h.quorumOf())
}

// quorumOf is how many nodes must hold h's lease.
func (h *Holder) quorumOf() int {
	if h.Quorum > 0 {
		return h.Quorum
	}
	return quorum.Majority(h.Engine.Pool.Size())
}
