package lease

import (
	"time"
)

// What each node last confirmed of a lease. The lease's validity is one
// time for all its nodes, but each node's key expires at its own: the TTL
// from the last request of the lease it answered yes to (the grant, an
// extension, a reentrant re-lock). A node that missed an extension
// expires the key earlier than the lease's validity says, and from then
// on another client may hold the lock there. The release (what it may
// count of a node that finds the key gone) and the clock watch (which
// nodes' jumps can cost the lease) read it node by node.

// nodeHold is what one node confirmed: it holds the token until until at
// least (the confirming round's start + TTL - drift; zero: it never
// confirmed), and the clock guard had counted jumps of its clock then.
type nodeHold struct {
	until time.Time
	jumps int
}

// confirm records that the nodes given hold l's token until until at
// least; jumps are the guard's counts of each node's clock jumps then (nil:
// no guard). A node keeps its later confirmation. Called with the holder's
// mu held, or before l is shared.
func (l *Lease) confirm(nodes []int, until time.Time, jumps []int) {
	for _, i := range nodes {
		if i < 0 || i >= len(l.nodes) || !until.After(l.nodes[i].until) {
			continue
		}
		l.nodes[i].until = until
		if i < len(jumps) {
			l.nodes[i].jumps = jumps[i]
		}
	}
}

// node returns what node i confirmed: its own record, or, for a node
// that granted the lease after the grant was decided and confirmed
// nothing since, the grant's. Called with the holder's mu held.
func (l *Lease) node(i int) nodeHold {
	nh := l.nodes[i]
	if nh.until.IsZero() && l.late != nil && l.late.Granted(i) {
		nh.until = l.granted
		if i < len(l.grantJumps) {
			nh.jumps = l.grantJumps[i]
		}
	}
	return nh
}

// Confirmed implements engine.Confirmed: the expiry node i last
// confirmed, and whether its clock jumped ahead since (its key may be
// gone early).
func (l *Lease) Confirmed(i int) (time.Time, bool) {
	h := l.holder
	h.mu.Lock()
	nh := l.node(i)
	h.mu.Unlock()
	g := h.Engine.Guard
	return nh.until, g != nil && g.Jumps(i) != nh.jumps
}

// holding counts the nodes that hold l for its whole current validity
// and whose clocks have not jumped since they confirmed it (jumps: the
// guard's counts now). Called with the holder's mu held.
func (l *Lease) holding(jumps []int) int {
	n := 0
	for i := range l.nodes {
		nh := l.node(i)
		if nh.until.IsZero() || nh.until.Before(l.until) {
			continue
		}
		if i < len(jumps) && jumps[i] != nh.jumps {
			continue
		}
		n++
	}
	return n
}
