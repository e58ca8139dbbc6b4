package node

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
)

// The operations of a counting semaphore's permit: acquire, extend,
// release. On each node the semaphore is a sorted set under its name, one
// member per holder (its token) scored by when its permit expires on the
// node's clock, and its permit count beside it (PermitsKey).

// SemAcquire takes one of Permits permits of the semaphore Key for Token,
// for TTL. A node answers OK when Token holds a permit now, including when
// an earlier try of the same command, resent by the client, had taken it
// (its expiry is then re-armed). Its Value is a SemGrant.
type SemAcquire struct {
	Key, Token string
	TTL        time.Duration
	Permits    int
	// MinUptime, when positive, is the least uptime in whole seconds at
	// which a node may grant; a node up for less changes nothing and
	// answers an error wrapping ErrNodeRecovering.
	MinUptime int64

	enc encoding
}

// SemGrant is what a refused SemAcquire's reply says beyond OK: how many
// holders the node counts. A grant says the node's time instead (in
// Reply.Time): the clock evidence of the vote.
type SemGrant struct {
	Holders int
}

// Name implements Op.
func (*SemAcquire) Name() string { return "semaphore acquire" }

// Lane implements Laned: the lock's name.
func (o *SemAcquire) Lane() string { return o.Key }

// Encode implements Op.
func (o *SemAcquire) Encode(ctx context.Context, l Layout, cmds []redis.Cmder) []redis.Cmder {
	args := o.enc.args(l, func() []any {
		return evalArgs(scripts.SemAcquire, l.keys(o.Key, PermitsKey(o.Key)), o.Token, o.TTL.Milliseconds(), o.Permits, o.MinUptime)
	})
	return append(cmds, shared(ctx, args))
}

// Decode implements Op: sem_acquire.lua's {status, n}, or a grant's
// node time.
func (o *SemAcquire) Decode(cmds []redis.Cmder) Reply {
	status, n, rep, done := decodeAdmission(cmds[0], "semaphore acquire", o.MinUptime)
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
func decodeAdmission(cmd redis.Cmder, what string, minUptime int64) (status, n int64, rep Reply, done bool) {
	if c, ok := cmd.(*redis.Cmd); ok && c.Err() == nil {
		if ms, ok := c.Val().(int64); ok {
			return 0, 0, granted(ms), true
		}
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
