package node

import (
	"fmt"
	"strconv"
)

// A counting semaphore's permits (the Shape Semaphore): on each node the
// semaphore is a sorted set under its name, one member per holder (its
// token) scored by when its permit expires on the node's clock, and its
// permit count beside it (PermitsKey).

// SemGrant is what a refused permit's Acquire's reply says beyond OK: how
// many holders the node counts. A grant says the node's time instead (in
// Reply.Time): the clock evidence of the vote.
type SemGrant struct {
	Holders int
}

// decodePermit reads sem_acquire.lua's reply to o: {status, n}, or a
// grant's node time.
func (o *Acquire) decodePermit(cmd *Cmd) Reply {
	status, n, rep, done := decodeAdmission(cmd, o.Name(), o.MinUptime)
	if done {
		return rep
	}
	if status == -2 {
		return Reply{Err: fmt.Errorf("%w: the semaphore %s has %d permits on this node, this one asks for %d: "+
			"semaphores that share a name must have the same count", ErrMisconfigured, o.Key, n, o.Permits)}
	}
	return Reply{OK: status == 1, Value: SemGrant{Holders: int(n)}}
}

// decodeAdmission reads the reply of a script that admits holders beside
// one another (sem_acquire.lua, read_acquire.lua): a grant's node time, or
// {status, n}. It is done, with rep, for a grant, a reply of another shape,
// and status -1: the node is up n seconds, less than minUptime; otherwise
// status and n are the script's, for the caller to read.
func decodeAdmission(cmd *Cmd, what string, minUptime int64) (status, n int64, rep Reply, done bool) {
	if ms, ok := cmd.Val().(int64); ok && cmd.Err() == nil {
		return 0, 0, granted(ms), true
	}
	r, err := slice(cmd, 2)
	if err != nil {
		return 0, 0, Reply{Err: err}, true
	}
	status, ok := r[0].(int64)
	n, err = number(r[1])
	switch {
	case !ok || err != nil:
		return 0, 0, Reply{Err: fmt.Errorf("redlock: unexpected %s reply %v", what, r)}, true
	case status == -1:
		return 0, 0, Reply{Err: fmt.Errorf("%w: up %ds, less than the restart delay %ds", ErrNodeRecovering, n, minUptime)}, true
	}
	return status, n, Reply{}, false
}

// number reads a script's integer, sent as an integer or as text.
func number(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("redlock: not a number: %v", v)
}
