package report

import "time"

// LockState is what the nodes held for one lock name when
// redlock.Redlock.Inspect read them. Each node is read at its own moment: the
// state may have changed by the time it is returned, and a lock held on a
// quorum here may have been released since (or taken, if free).
type LockState struct {
	// Name is the lock's name.
	Name string
	// Nodes has one entry per node, in the order of the clients given to
	// redlock.New.
	Nodes []NodeLockState
	// Holder is the token (for a reentrant lock, with its hold count) that holds
	// the lock on the most nodes; "" when no node holds it.
	Holder string
	// Held is how many nodes Holder holds the lock on.
	Held int
	// Quorum is how many nodes a holder needs: N/2+1.
	Quorum int
	// Kind is what the name is on the nodes: [KindLock] (a Mutex, or an
	// RWMutex's writer), [KindSemaphore], [KindReaders], or "" when no
	// node that answered holds anything under it. When nodes
	// differ (a rare, passing state: each kind refuses the other), it is the
	// kind found on the most nodes, a lock on a tie.
	Kind string
	// Semaphore describes the semaphore when Kind is [KindSemaphore]; nil
	// otherwise. For a semaphore, Holder and Held are "" and 0 (so Locked
	// is false): its holders are in Semaphore.Holders.
	Semaphore *SemaphoreState
	// Readers describes a redlock.RWMutex's readers when Kind is [KindReaders]
	// (Permits is 0, Quorum the majority); nil otherwise.
	Readers *SemaphoreState
}

// The kinds of name redlock.Redlock.Inspect tells apart, in [LockState.Kind] and
// [NodeLockState.Kind]. Other primitives may add kinds: callers should
// treat a kind they do not know as neither.
const (
	// KindLock is a redlock.Mutex's lock, plain or reentrant.
	KindLock = "lock"
	// KindSemaphore is a redlock.Semaphore's set of permits.
	KindSemaphore = "semaphore"
	// KindReaders is a redlock.RWMutex's readers (its writer is a KindLock).
	KindReaders = "readers"
)

// Locked reports whether one holder held the lock on a quorum of nodes.
func (s *LockState) Locked() bool { return s.Held >= s.Quorum }

// Reachable returns how many nodes answered.
func (s *LockState) Reachable() int {
	n := 0
	for _, ns := range s.Nodes {
		if ns.Err == nil {
			n++
		}
	}
	return n
}

// NodeLockState is what one node held for a lock name (see [LockState]).
type NodeLockState struct {
	// Index is the node's position in the clients given to redlock.New.
	Index int
	// Addr is the node's address as its client reports it.
	Addr string
	// Err is why the node could not be read, a [*NodeError]: the node did
	// not answer within the node timeout, could not be reached, is down
	// (see redlock.Redlock.Health), or holds something at the lock's name that is
	// neither a lock nor a semaphore (redlock.ErrMisconfigured). The fields below
	// are then zero.
	Err error
	// Held is set when the node holds the lock.
	Held bool
	// TTL is how long the node was to keep the lock when it answered (its
	// PTTL); 0 when free.
	TTL time.Duration
	// Holder is the holder's token (a reentrant lock's too: see
	// redlock.WithReentrant); "" when free. Tokens are secrets of
	// sorts: whoever knows one can release or extend that acquisition.
	Holder string
	// Reentrant is set when the lock is a reentrant one.
	Reentrant bool
	// Holds is the owner's hold count of a reentrant lock, 1 for a plain
	// lock, 0 when free.
	Holds int
	// Fence is the name's fencing counter on the node (see redlock.WithFencing),
	// 0 when it has none: the last fencing token recorded there, whether
	// or not the lock is held.
	Fence uint64
	// Kind is what the node holds under the name: [KindLock],
	// [KindSemaphore], [KindReaders], or "" when nothing (or Err is set).
	Kind string
	// PermitCount is a semaphore's permit count as the node keeps it; 0
	// for a lock, when free, or when the node keeps none.
	PermitCount int
	// Permits are a semaphore's live permits on the node, soonest to
	// expire first; nil for a lock or when free. A semaphore leaves the
	// lock fields above (Held to Holds) zero.
	Permits []NodePermit
}

// SemaphoreState is what the nodes held for a semaphore (see
// [LockState.Semaphore]).
type SemaphoreState struct {
	// Permits is the permit count the nodes keep for the name (the count
	// found on the most nodes); 0 when none keeps one.
	Permits int
	// Quorum is how many nodes a holder needs at the default quorum for
	// Permits, N·Permits/(Permits+1)+1 (see redlock.Semaphore.Quorum); a
	// Semaphore given redlock.WithQuorum counts with its own. 0 when Permits is.
	Quorum int
	// Holders has every token admitted on at least one node that answered,
	// most nodes first (then by token).
	Holders []PermitHolder
}

// Held returns how many holders were admitted on at least Quorum nodes:
// those that hold a permit.
func (s *SemaphoreState) Held() int {
	n := 0
	for _, h := range s.Holders {
		if s.Quorum > 0 && h.Nodes >= s.Quorum {
			n++
		}
	}
	return n
}

// PermitHolder is one holder of a semaphore across the nodes (see
// [SemaphoreState.Holders]).
type PermitHolder struct {
	// Token is the holder's token (a secret of sorts, as
	// [NodeLockState.Holder] is).
	Token string
	// Nodes is how many nodes admitted it.
	Nodes int
}

// NodePermit is one live permit of a semaphore on one node (see
// [NodeLockState.Permits]).
type NodePermit struct {
	// Token is the holder's token.
	Token string
	// TTL is how long the node was to keep the permit when it answered, by
	// its own clock.
	TTL time.Duration
}

// ForcedRelease is one node's outcome of redlock.Redlock.ForceUnlock.
type ForcedRelease struct {
	// Index is the node's position in the clients given to redlock.New.
	Index int
	// Addr is the node's address as its client reports it.
	Addr string
	// Err is why the node could not be asked, a [*NodeError] (as in
	// [NodeLockState.Err]); the lock may then still be held there until its
	// TTL passes. The fields below are then zero.
	Err error
	// Deleted is set when the node held the lock and deleted it.
	Deleted bool
	// Holder is the token (for a reentrant lock, with its hold count) of the lock
	// deleted; "" when the node did not hold it.
	Holder string
	// Reentrant is set when the lock deleted was a reentrant one.
	Reentrant bool
}
