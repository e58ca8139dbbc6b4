package redlock

import "time"

// NodeHealth is what a Redlock knows of one node (see [Redlock.Health]).
type NodeHealth struct {
	// Index is the node's position in the clients given to [New].
	Index int
	// Addr is the node's address as its client reports it.
	Addr string
	// Down is true while the node is skipped: it timed out or could not be
	// reached, and has not answered since. Requests to it fail at once
	// with [ErrNodeDown]; it is probed in the background.
	Down bool
	// Since is when the node went down; zero when it is up.
	Since time.Time
	// Err is why the node went down; nil when it is up.
	Err error
	// Owed is how many releases wait for the node to answer again.
	Owed int
	// Off holds the optional features the node refused ([FeatureQueue],
	// [FeatureIdentify]), each with the error that turned it off; nil when
	// none. The lock works without them (see [FeatureQueue]); each is
	// also reported once to the Observer.
	Off map[string]error
	// Way is how the node is spoken to: "scripts" (Lua scripts, the
	// default), or, for a node that refuses them (see [FeatureScripts] and
	// [WithoutScripts]), "native" (the server's own DELEX for plain
	// releases, transactions for the rest) or "transactions" (WATCH,
	// MULTI, EXEC; also the way of a node told to avoid scripts that has
	// not been asked yet whether it has DELEX).
	Way string
	// Clock is why the node does not vote now because of its clock (an
	// error wrapping [ErrClockJump]; see [WithClockTolerance]), nil while
	// it votes.
	Clock error
}

// Health returns what the Redlock knows of each node's health, in the order
// of the clients given to [New]. It does no I/O.
func (r *Redlock) Health() []NodeHealth {
	out := make([]NodeHealth, r.e.pool.size())
	for i := range out {
		h := NodeHealth{Index: i, Addr: r.e.pool.addr(i)}
		h.Down, h.Since, h.Owed, h.Err = r.e.pool.health(i)
		h.Off = r.e.features.of(i)
		h.Way = r.e.pool.way(i).String()
		if r.e.guard != nil {
			h.Clock = r.e.guard.refused(i)
		}
		out[i] = h
	}
	return out
}
