package redlock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/report"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/google/uuid"

	"github.com/redlock-go/redlock/internal/node"
)

// The operator's view of a lock or semaphore: what every node holds for a
// name (Redlock.Inspect), and a release whoever holds it (Redlock.ForceUnlock).
// Neither takes part in the algorithm: each sends one request to every node
// at once and reports every node's answer, not a quorum's.

// Inspect reads what every node holds for the lock called name: whether it
// is held and by which token, for how long, and the name's fencing
// counter; for a [Semaphore] (see [report.LockState.Kind]), its permit
// count and live permits instead. It sends one read-only request to every
// node at once, down nodes (see [Redlock.Health]) excepted, and returns
// once every node answered, the node timeout passed, or ctx ended; a node
// that failed has its error in [report.NodeLockState.Err].
//
// It returns an error wrapping [ErrInvalidArgument] for a nil context or an
// empty name, [ErrClosed] after [Redlock.Close], and, when ctx ended before
// every node answered, the state read so far (the silent nodes with ctx's
// error) and an error wrapping ctx.Err().
func (r *Redlock) Inspect(ctx context.Context, name string) (*report.LockState, error) {
	replies, err := survey(ctx, r.e, name, &node.Inspect{Key: name}, r.cfg.NodeTimeout)
	if replies == nil {
		return nil, err
	}
	s := &report.LockState{Name: name, Nodes: make([]report.NodeLockState, len(replies)), Quorum: r.Quorum()}
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
	case report.KindSemaphore:
		s.Holder, s.Held = "", 0 // a lock on a minority of nodes is not this name's holder
		s.Semaphore = semaphoreState(s.Nodes, report.KindSemaphore)
	case report.KindReaders:
		s.Holder, s.Held = "", 0
		s.Readers = semaphoreState(s.Nodes, report.KindReaders)
		s.Readers.Quorum = s.Quorum
	}
	if err != nil {
		return s, fmt.Errorf("redlock: inspect %q: %w", name, err)
	}
	return s, nil
}

// nodeState is node i's state, from its reply rep to an Inspect.
func nodeState(e *engine.Engine, i int, rep node.Reply) report.NodeLockState {
	ns := report.NodeLockState{Index: i, Addr: e.Pool.Addr(i)}
	st, _ := rep.Value.(node.KeyState)
	switch {
	case rep.Err != nil:
		ns.Err = &report.NodeError{Index: i, Addr: ns.Addr, Err: rep.Err}
	case st.Semaphore || st.Readers:
		ns.Kind, ns.PermitCount, ns.Fence = report.KindSemaphore, st.Permits, st.Counter
		if st.Readers {
			ns.Kind = report.KindReaders
		}
		for _, p := range st.Holders {
			ns.Permits = append(ns.Permits, report.NodePermit(p))
		}
	case st.Held:
		ns.Kind = report.KindLock
		ns.Held, ns.TTL, ns.Holder, ns.Reentrant, ns.Holds, ns.Fence = true, st.TTL, st.Holder, st.Reentrant, st.Holds, st.Counter
	default:
		ns.Fence = st.Counter
	}
	return ns
}

// kindOf is the kind found on the most nodes, a lock on a tie; "" when no
// node holds anything.
func kindOf(nodes []report.NodeLockState) string {
	count := map[string]int{}
	for _, ns := range nodes {
		count[ns.Kind]++
	}
	kind, most := "", 0
	for _, k := range []string{report.KindLock, report.KindSemaphore, report.KindReaders} { // a lock first: it wins a tie
		if count[k] > most {
			kind, most = k, count[k]
		}
	}
	return kind
}

// semaphoreState gathers the semaphore's permit count and holders (or the
// readers) from every node that holds the name as kind.
func semaphoreState(nodes []report.NodeLockState, kind string) *report.SemaphoreState {
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
	s := &report.SemaphoreState{}
	for k, n := range counts {
		if n > counts[s.Permits] || n == counts[s.Permits] && k < s.Permits {
			s.Permits = k
		}
	}
	if s.Permits > 0 {
		s.Quorum = quorum.Permits(len(nodes), s.Permits)
	}
	for token, n := range admitted {
		s.Holders = append(s.Holders, report.PermitHolder{Token: token, Nodes: n})
	}
	slices.SortFunc(s.Holders, func(a, b report.PermitHolder) int {
		return cmp.Or(cmp.Compare(b.Nodes, a.Nodes), strings.Compare(a.Token, b.Token))
	})
	return s
}

// ForceUnlock deletes the lock called name on every node that holds it,
// whoever holds it, and announces the release as [Mutex.Unlock] does. It
// never deletes or lowers the name's fencing counter, and keeps a key that
// is not a lock (that node reports an error wrapping [ErrMisconfigured]).
// It sends one request to every node at once, down nodes excepted, and
// returns once every node answered, the node timeout passed, or ctx ended,
// with one entry per node; a node that failed ([report.ForcedRelease.Err])
// may still hold the lock until its TTL passes. A request still in flight
// then carries on in the background ([Redlock.Close] waits for it).
//
// The holder is not told: its next extension finds the token gone. Its
// [Mutex.Unlock] within the lock's validity cannot tell a forced unlock
// from its own resent release, and returns nil. ForceUnlock returns an
// error wrapping [ErrInvalidArgument] for a nil context or an empty name,
// [ErrClosed] after [Redlock.Close], and, when ctx ended before every node
// answered, the outcomes so far and an error wrapping ctx.Err().
func (r *Redlock) ForceUnlock(ctx context.Context, name string) ([]report.ForcedRelease, error) {
	replies, err := survey(ctx, r.e, name, &node.Release{Shape: node.Any, Key: name, Notice: uuid.NewString()}, r.cfg.NodeTimeout)
	if replies == nil {
		return nil, err
	}
	out := make([]report.ForcedRelease, len(replies))
	for i, rep := range replies {
		fr := report.ForcedRelease{Index: i, Addr: r.e.Pool.Addr(i)}
		switch f, _ := rep.Value.(node.Forced); {
		case rep.Err != nil:
			fr.Err = &report.NodeError{Index: i, Addr: fr.Addr, Err: rep.Err}
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
// report.ErrNodeTimeout (and may be put down, as after any timeout). When ctx
// ends first, the silent nodes get ctx's error, which survey returns too.
// It returns no replies and ErrClosed after Close.
func survey(ctx context.Context, e *engine.Engine, name string, op node.Op, timeout time.Duration) ([]node.Reply, error) {
	if ctx == nil {
		return nil, engine.Invalid("nil context")
	}
	if name == "" {
		return nil, engine.Invalid("empty lock name")
	}
	if err := e.Track(); err != nil {
		return nil, err
	}
	defer e.Untrack()
	ended := ctx.Err()
	rd := quorum.NewRound(ctx, e.Pool, timeout, e.Report, e.Pool.Size()).KeepReplies().SendAll(op, nil, nil)
	err := rd.Gather(ctx)
	if err == nil && ended != nil {
		// Ended before any node was read: the nodes' replies may still win
		// the vote loop's race with ctx, and the caller is told all the same.
		err = ended
	}
	return rd.Replies, err
}

// Audit reads every node's settings and its user's rights now, with
// commands that change nothing, judges them against the options given to
// [New] (a Mutex given other values is not judged apart) and returns one
// [report.NodeAudit] per node, in the order of the clients given to New:
// for a readiness check, or `redlock doctor` (see docs/DEPLOYMENTS.md,
// "What the audit finds"). It asks every node at once, down nodes
// included, each for at most five seconds; a node that could not be read
// has its error in [report.NodeAudit.Err]. It records what it found for
// [report.NodeHealth.Audit], and tells a [report.AuditObserver] of each
// finding above [report.SeverityInfo] not told before for that node.
//
// It returns an error wrapping [ErrInvalidArgument] for a nil context,
// [ErrClosed] after [Redlock.Close], and, when ctx ended before every node
// was read, the audits so far (the others with ctx's error) and an error
// wrapping ctx.Err().
func (r *Redlock) Audit(ctx context.Context) ([]report.NodeAudit, error) {
	if ctx == nil {
		return nil, engine.Invalid("nil context")
	}
	if err := r.e.Track(); err != nil {
		return nil, err
	}
	defer r.e.Untrack()
	out := r.audits.audit(ctx)
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("redlock: audit: %w", err)
	}
	return out, nil
}
