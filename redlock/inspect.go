package redlock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/google/uuid"

	"github.com/redlock-go/redlock/internal/node"
)

// The operator's view of a lock or semaphore: what every node holds for a
// name (Redlock.Inspect), and a release whoever holds it (Redlock.ForceUnlock).
// Neither takes part in the algorithm: each sends one request to every node
// at once and reports every node's answer, not a quorum's.

// LockState is what the nodes held for one lock name when
// [Redlock.Inspect] read them. Each node is read at its own moment: the
// state may have changed by the time it is returned, and a lock held on a
// quorum here may have been released since (or taken, if free).
type LockState struct {
	// Name is the lock's name.
	Name string
	// Nodes has one entry per node, in the order of the clients given to
	// [New].
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
	// Readers describes an [RWMutex]'s readers when Kind is [KindReaders]
	// (Permits is 0, Quorum the majority); nil otherwise.
	Readers *SemaphoreState
}

// The kinds of name [Redlock.Inspect] tells apart, in [LockState.Kind] and
// [NodeLockState.Kind]. Other primitives may add kinds: callers should
// treat a kind they do not know as neither.
const (
	// KindLock is a [Mutex]'s lock, plain or reentrant.
	KindLock = "lock"
	// KindSemaphore is a [Semaphore]'s set of permits.
	KindSemaphore = "semaphore"
	// KindReaders is an [RWMutex]'s readers (its writer is a KindLock).
	KindReaders = "readers"
)

// SemaphoreState is what the nodes held for a semaphore (see
// [LockState.Semaphore]).
type SemaphoreState struct {
	// Permits is the permit count the nodes keep for the name (the count
	// found on the most nodes); 0 when none keeps one.
	Permits int
	// Quorum is how many nodes a holder needs at the default quorum for
	// Permits, N·Permits/(Permits+1)+1 (see [Semaphore.Quorum]); a
	// Semaphore given [WithQuorum] counts with its own. 0 when Permits is.
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
	// Index is the node's position in the clients given to [New].
	Index int
	// Addr is the node's address as its client reports it.
	Addr string
	// Err is why the node could not be read, a [*NodeError]: the node did
	// not answer within the node timeout, could not be reached, is down
	// (see [Redlock.Health]), or holds something at the lock's name that is
	// neither a lock nor a semaphore ([ErrMisconfigured]). The fields below
	// are then zero.
	Err error
	// Held is set when the node holds the lock.
	Held bool
	// TTL is how long the node was to keep the lock when it answered (its
	// PTTL); 0 when free.
	TTL time.Duration
	// Holder is the holder's token (a reentrant lock's too: see
	// [WithReentrant]); "" when free. Tokens are secrets of
	// sorts: whoever knows one can release or extend that acquisition.
	Holder string
	// Reentrant is set when the lock is a reentrant one.
	Reentrant bool
	// Holds is the owner's hold count of a reentrant lock, 1 for a plain
	// lock, 0 when free.
	Holds int
	// Fence is the name's fencing counter on the node (see [WithFencing]),
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

// Inspect reads what every node holds for the lock called name: whether it
// is held and by which token, for how long, and the name's fencing counter.
// It sends one read-only request to every node at once and returns once
// every node answered, the node timeout passed, or ctx ended. A node that
// failed has its error in [NodeLockState.Err]; a down node (see
// [Redlock.Health]) is not asked. It takes and changes nothing; it is the
// library's side of `redlock status`.
//
// When name is a [Semaphore], it says so in [LockState.Kind] and reads its
// permit count and live permits instead: each node's in
// [NodeLockState.Permits], with the time each has left by that node's
// clock, and across the nodes in [LockState.Semaphore].
//
// It returns an error wrapping [ErrInvalidArgument] for a nil context or an
// empty name, [ErrClosed] after [Redlock.Close], and, when ctx ended before
// every node answered, the state read so far (the silent nodes with ctx's
// error) and an error wrapping ctx.Err().
func (r *Redlock) Inspect(ctx context.Context, name string) (*LockState, error) {
	replies, err := survey(ctx, r.e, name, &node.Inspect{Key: name}, r.cfg.NodeTimeout)
	if replies == nil {
		return nil, err
	}
	s := &LockState{Name: name, Nodes: make([]NodeLockState, len(replies)), Quorum: r.Quorum()}
	count := map[string]int{}
	for i, rep := range replies {
		ns := nodeState(r.e, i, rep)
		if ns.Held {
			count[ns.Holder]++
			if count[ns.Holder] > s.Held || count[ns.Holder] == s.Held && ns.Holder < s.Holder {
				s.Holder, s.Held = ns.Holder, count[ns.Holder]
			}
		}
		s.Nodes[i] = ns
	}
	s.Kind = kindOf(s.Nodes)
	switch s.Kind {
	case KindSemaphore:
		s.Holder, s.Held = "", 0 // a lock on a minority of nodes is not this name's holder
		s.Semaphore = semaphoreState(s.Nodes, KindSemaphore)
	case KindReaders:
		s.Holder, s.Held = "", 0
		s.Readers = semaphoreState(s.Nodes, KindReaders)
		s.Readers.Quorum = s.Quorum
	}
	if err != nil {
		return s, fmt.Errorf("redlock: inspect %q: %w", name, err)
	}
	return s, nil
}

// nodeState is node i's state, from its reply rep to an Inspect.
func nodeState(e *engine.Engine, i int, rep node.Reply) NodeLockState {
	ns := NodeLockState{Index: i, Addr: e.Pool.Addr(i)}
	st, _ := rep.Value.(node.KeyState)
	switch {
	case rep.Err != nil:
		ns.Err = &NodeError{Index: i, Addr: ns.Addr, Err: rep.Err}
	case st.Semaphore || st.Readers:
		ns.Kind, ns.PermitCount, ns.Fence = KindSemaphore, st.Permits, st.Counter
		if st.Readers {
			ns.Kind = KindReaders
		}
		for _, p := range st.Holders {
			ns.Permits = append(ns.Permits, NodePermit(p))
		}
	case st.Held:
		ns.Kind = KindLock
		ns.Held, ns.TTL, ns.Holder, ns.Reentrant, ns.Holds, ns.Fence = true, st.TTL, st.Holder, st.Reentrant, st.Holds, st.Counter
	default:
		ns.Fence = st.Counter
	}
	return ns
}

// kindOf is the kind found on the most nodes, a lock on a tie; "" when no
// node holds anything.
func kindOf(nodes []NodeLockState) string {
	count := map[string]int{}
	for _, ns := range nodes {
		count[ns.Kind]++
	}
	kind, most := "", 0
	for _, k := range []string{KindLock, KindSemaphore, KindReaders} { // a lock first: it wins a tie
		if count[k] > most {
			kind, most = k, count[k]
		}
	}
	return kind
}

// semaphoreState gathers the semaphore's permit count and holders (or the
// readers) from every node that holds the name as kind.
func semaphoreState(nodes []NodeLockState, kind string) *SemaphoreState {
	counts, admitted := map[int]int{}, map[string]int{}
	for _, ns := range nodes {
		if ns.Kind != kind {
			continue
		}
		if ns.PermitCount > 0 {
			counts[ns.PermitCount]++
		}
		for _, p := range ns.Permits {
			admitted[p.Token]++
		}
	}
	s := &SemaphoreState{}
	for k, n := range counts {
		if n > counts[s.Permits] || n == counts[s.Permits] && k < s.Permits {
			s.Permits = k
		}
	}
	if s.Permits > 0 {
		s.Quorum = quorum.Permits(len(nodes), s.Permits)
	}
	for token, n := range admitted {
		s.Holders = append(s.Holders, PermitHolder{Token: token, Nodes: n})
	}
	slices.SortFunc(s.Holders, func(a, b PermitHolder) int {
		return cmp.Or(cmp.Compare(b.Nodes, a.Nodes), strings.Compare(a.Token, b.Token))
	})
	return s
}

// ForcedRelease is one node's outcome of [Redlock.ForceUnlock].
type ForcedRelease struct {
	// Index is the node's position in the clients given to [New].
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

// ForceUnlock deletes the lock called name on every node that holds it,
// whoever holds it: the way out of a lock whose holder is stuck, or gone
// with a long TTL. Each node that deletes it announces the release, as
// [Mutex.Unlock] does, so that waiting Locks try at once. It never deletes
// or lowers the name's fencing counter: the next holder's token is still
// greater than the one the lock had. It does not refuse a key that holds
// something other than a lock: that node reports an error wrapping
// [ErrMisconfigured] and keeps the key.
//
// It sends one request to every node at once and returns once every node
// answered, the node timeout passed, or ctx ended, with one entry per node:
// a node that failed has its error in [ForcedRelease.Err] and may still
// hold the lock until its TTL passes; a down node (see [Redlock.Health]) is
// not asked. A request still in flight when it returns carries on in the
// background ([Redlock.Close] waits for it).
//
// The holder is not told: its [Mutex] notices at its next extension (or
// renewal), which finds the token gone and reports the lock lost. Until
// then it may still act as the holder; protect the resource with fencing
// tokens (see [WithFencing]) if that matters. Its [Mutex.Unlock], within
// the lock's validity, cannot tell a forced unlock from its own release
// resent by the client (a key gone on the server it was taken on), and
// returns nil.
//
// It returns an error wrapping [ErrInvalidArgument] for a nil context or an
// empty name, [ErrClosed] after [Redlock.Close], and, when ctx ended before
// every node answered, the outcomes so far and an error wrapping ctx.Err().
func (r *Redlock) ForceUnlock(ctx context.Context, name string) ([]ForcedRelease, error) {
	replies, err := survey(ctx, r.e, name, &node.Release{Shape: node.Any, Key: name, Notice: uuid.NewString()}, r.cfg.NodeTimeout)
	if replies == nil {
		return nil, err
	}
	out := make([]ForcedRelease, len(replies))
	for i, rep := range replies {
		fr := ForcedRelease{Index: i, Addr: r.e.Pool.Addr(i)}
		switch f, _ := rep.Value.(node.Forced); {
		case rep.Err != nil:
			fr.Err = &NodeError{Index: i, Addr: fr.Addr, Err: rep.Err}
		case rep.OK:
			fr.Deleted, fr.Holder, fr.Reentrant = true, f.Holder, f.Reentrant
		}
		out[i] = fr
	}
	if err != nil {
		return out, fmt.Errorf("redlock: force unlock %q: %w", name, err)
	}
	return out, nil
}

// survey checks the arguments of an operator's call on name, sends op to
// every node at once and returns every node's reply, in node order, once
// all answered or the node timeout passed: a node still silent then gets
// ErrNodeTimeout (and may be put down, as after any timeout). When ctx
// ends first, the silent nodes get ctx's error, which survey returns too.
// It returns no replies and ErrClosed after Close.
func survey(ctx context.Context, e *engine.Engine, name string, op node.Op, timeout time.Duration) ([]node.Reply, error) {
	if ctx == nil {
		return nil, engine.Invalid("nil context")
	}
	if name == "" {
		return nil, engine.Invalid("empty lock name")
	}
	if err := e.Track(1); err != nil {
		return nil, err
	}
	defer e.WG.Done()
	rd := quorum.NewRound(ctx, e.Pool, timeout, e.Report, e.Pool.Size()).KeepReplies().SendAll(op, nil, nil)
	return rd.Replies, rd.Gather(ctx)
}
