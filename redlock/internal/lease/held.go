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

// Jumped implements engine.Held: a lease whose current validity node i
// confirmed before the jump (its grant's voters, or those of the last
// extension that moved it), left with fewer such nodes than its quorum
// whose clocks kept it, is lost, with a cause that names the clock.
func (l *Lease) Jumped(i int, jumps []int) error {
	h := l.holder
	h.mu.Lock()
	kept, all := l.holding(jumps), l.holding(nil)
	h.mu.Unlock()
	if kept >= h.quorumOf() {
		return nil
	}
	return fmt.Errorf("%w: %w: node %d's clock jumped; %d of the %d nodes that hold it for its validity still may, quorum %d",
		engine.ErrLockLost, quorum.ErrClockJump, i, kept, all, h.quorumOf())
}

// jumps is the clock guard's count of each node's jumps now; nil when no
// guard is on.
func (h *Holder) jumps() []int {
	if h.Engine.Guard == nil {
		return nil
	}
	return h.Engine.Guard.JumpsOf()
}

// quorumOf is how many nodes must hold h's lease.
func (h *Holder) quorumOf() int {
	if h.Quorum > 0 {
		return h.Quorum
	}
	return quorum.Majority(h.Engine.Pool.Size())
}
