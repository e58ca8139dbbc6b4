package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A lock's operations without scripts (see tx.go): each answers as its
// script does, so that the layers above read one reply whatever the way.

// Transact implements Transacted. A Plain lock's is SET NX GET PX alone
// (see native.go), or MULTI with the fencing counter's GET for a fenced
// lock (after INFO, on the same connection, for the restart delay); a
// Reentrant lock's is an optimistic transaction (see reentrant_tx.go). The
// other shapes have no way without scripts (see WithoutScripts).
func (o *Acquire) Transact(ctx context.Context, t *Tx) Reply {
	switch {
	case o.plain():
		rep, _ := transactNative(ctx, t, o, o.Key)
		return rep
	case o.Shape == Plain:
		return t.Watch(ctx, o.Key, o.fencedTry(ctx, t))
	case o.Shape == Reentrant:
		return t.Watch(ctx, o.Key, o.reentrantTry(ctx, t))
	}
	return Reply{Err: WithoutScripts(o, nil)}
}

// granted reads the reply of SET key token NX GET PX as a grant, with n
// the fencing counter read beside it; wrongType is set when the key holds
// another type (the caller tells a lock from what is none).
func (o *Acquire) granted(v any, err error, n uint64) (rep Reply, wrongType bool) {
	g := Grant{Counter: n}
	switch {
	case errors.Is(err, ErrNil) || err == nil && v == nil:
		return Reply{OK: true, Value: g}, false
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return Reply{Value: g}, true
	case err != nil:
		return Reply{Err: err}, false
	}
	holder, _ := v.(string)
	if holder == o.Token {
		return Reply{OK: true, Value: g}, false // an earlier try, resent by the client, set it
	}
	g.Holder = holder
	return Reply{Value: g}, false
}

// fencedTry is a fenced (or restart-delayed) plain acquisition: INFO for
// the uptime first when asked, then MULTI, GET of the counter, SET NX GET
// PX, EXEC on the same connection, so that the counter is read in the step
// that grants, and a restart in between breaks the connection.
func (o *Acquire) fencedTry(ctx context.Context, t *Tx) func(s *Step) (Reply, error) {
	return func(s *Step) (Reply, error) {
		if rep, done, err := recovering(ctx, s, o.MinUptime); done || err != nil {
			return rep, err
		}
		var writes [][]any
		fk := t.layout.Beside(o.Key, o.FenceKey)
		if fk != "" {
			writes = append(writes, []any{"get", fk})
		}
		writes = append(writes, []any{"set", o.Key, o.Token, "nx", "get", "px", o.TTL.Milliseconds()})
		after := o.Ack.encode(nil)
		res, err := s.Exec(ctx, writes, refs(after)...)
		if err != nil {
			return Reply{}, err
		}
		var n uint64
		if fk != "" {
			if n, err = counterOf(res[0], o.FenceKey); err != nil {
				return Reply{Err: err}, nil
			}
		}
		last := res[len(res)-1]
		rep, wrongType := o.granted(last, replyErr(last), n)
		if wrongType {
			return t.refusedByType(ctx, o.Key, rep), nil
		}
		return o.Ack.check(after, rep), nil
	}
}

// recovering reads the node's uptime for an acquisition with a restart
// delay of least seconds (none when 0); done is set, with the reply, when
// the node is too recent.
func recovering(ctx context.Context, s *Step, least int64) (rep Reply, done bool, err error) {
	if least <= 0 {
		return Reply{}, false, nil
	}
	info := NewText("info", "server")
	if err := s.Read(ctx, nil, info); err != nil {
		return Reply{}, false, err
	}
	up, err := infoField(info.Text())("uptime_in_seconds")
	if err != nil {
		return Reply{Err: err}, true, nil
	}
	if n, _ := strconv.ParseInt(up, 10, 64); n < least {
		return Reply{Err: fmt.Errorf("%w: up %ss, less than the restart delay %ds", ErrNodeRecovering, up, least)}, true, nil
	}
	return Reply{}, false, nil
}

// Transact implements Transacted: the counter raised and the lock's
// holder read under WATCH of both.
func (o *Fence) Transact(ctx context.Context, t *Tx) Reply {
	return raise(ctx, t, o.Key, o.Token, o.FenceKey, o.Fence, o.Reentrant, o.Ack)
}

// raise raises key's fencing counter fenceKey to fence and reports
// whether key holds token (a reentrant lock's owner field when
// reentrant), under WATCH of both.
func raise(ctx context.Context, t *Tx, key, token, fenceKey string, fence uint64, reentrant bool, ack Ack) Reply {
	fk := t.layout.Beside(key, fenceKey)
	if fk == "" {
		return Reply{Err: fmt.Errorf("%w: the fencing counter of %s cannot be kept beside it on this node", ErrMisconfigured, key)}
	}
	return t.Watch(ctx, key, func(s *Step) (Reply, error) {
		ctr := NewText("get", fk)
		held, holds := holding(ctx, key, token, reentrant)
		if err := s.Read(ctx, []string{key, fk}, append([]*Cmd{ctr}, holds...)...); err != nil {
			return Reply{}, err
		}
		current, err := counterOf(ctr.Val(), fenceKey)
		if err != nil {
			return Reply{Err: err}, nil
		}
		rep := Reply{OK: held()}
		if current >= fence {
			return rep, nil
		}
		after := ack.encode(nil)
		if _, err := s.Exec(ctx, [][]any{{"set", fk, fence}}, refs(after)...); err != nil {
			return Reply{}, err
		}
		return ack.check(after, rep), nil
	})
}

// holding returns the reads that tell whether key holds token (a plain
// lock's value, or a reentrant lock's owner field), and the function that
// reads their replies once they are in.
func holding(ctx context.Context, key, token string, reentrant bool) (func() bool, []*Cmd) {
	if reentrant {
		kind := NewText("type", key)
		field := NewText("hget", key, token)
		return func() bool { return kind.Str() == "hash" && field.Val() != nil }, []*Cmd{kind, field}
	}
	get := NewText("get", key) // WRONGTYPE for a reentrant lock: not this token's
	return func() bool { v, _ := text(get.Val()); return get.Err() == nil && v == token }, []*Cmd{get}
}

// Transact implements Transacted: for a Plain lock SET key token IFEQ
// token PX ttl where the server has it (see native.go), else PEXPIRE under
// WATCH, when the key holds the token (a Reentrant lock's owner field).
// The other shapes have no way without scripts (see WithoutScripts).
func (o *Extend) Transact(ctx context.Context, t *Tx) Reply {
	if err := WithoutScripts(o, nil); err != nil {
		return Reply{Err: err}
	}
	if rep, ok := transactNative(ctx, t, o, o.Key); ok {
		return rep
	}
	return rearmHeld(ctx, t, o.Key, o.Token, o.TTL, o.Shape == Reentrant, o.Ack)
}

// rearmHeld sets key's time to live to ttl under WATCH when key holds
// token (a reentrant lock's owner field when reentrant): OK when it did.
func rearmHeld(ctx context.Context, t *Tx, key, token string, ttl time.Duration, reentrant bool, ack Ack) Reply {
	return t.Watch(ctx, key, func(s *Step) (Reply, error) {
		held, holds := holding(ctx, key, token, reentrant)
		if err := s.Read(ctx, []string{key}, holds...); err != nil {
			return Reply{}, err
		}
		if !held() {
			return Reply{}, nil
		}
		after := ack.encode(nil)
		res, err := s.Exec(ctx, [][]any{{"pexpire", key, ttl.Milliseconds()}}, refs(after)...)
		if err != nil {
			return Reply{}, err
		}
		if err := firstErr(res); err != nil {
			return Reply{Err: err}, nil
		}
		return ack.check(after, Reply{OK: res[0] == int64(1)}), nil
	})
}

// alien is alien in stored.lua: an error when a key of kind with time to
// live pttl is no lock (a type a lock never has, or one without expiry),
// nil when it may be one or is absent.
func alien(key, kind string, pttl int64) error {
	switch {
	case kind == "none":
		return nil
	case (kind == "string" || kind == "hash") && pttl != -1:
		return nil
	case kind == "string" || kind == "hash":
		kind += " without expiry"
	}
	who := "another program"
	if kind == "zset" {
		who = "a Semaphore or another program"
	}
	return &misconfiguredError{err: fmt.Errorf("WRONGTYPE redlock: the key %s holds a %s, not a lock: %s uses this name", key, kind, who)}
}

// refusedByType is an acquisition's answer when SET found key of another
// type: refused (a reentrant lock holds it), or an error when key is no
// lock at all.
func (t *Tx) refusedByType(ctx context.Context, key string, refused Reply) Reply {
	kind := NewText("type", key)
	pttl := NewInt("pttl", key)
	if err := t.Pipelined(ctx, key, kind, pttl); err != nil {
		return Reply{Err: err}
	}
	if err := alien(key, kind.Str(), pttl.Num()); err != nil {
		return Reply{Err: err}
	}
	return refused
}

// counterOf reads a fencing counter's value as stored (nil when absent).
func counterOf(v any, key string) (uint64, error) {
	s, ok := text(v)
	if !ok {
		if err := replyErr(v); err != nil {
			return 0, err
		}
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redlock: fencing counter %s is not a number: %w", key, err)
	}
	return n, nil
}

// firstErr returns the first error among EXEC's results.
func firstErr(res []any) error {
	for _, v := range res {
		if err := replyErr(v); err != nil {
			return err
		}
	}
	return nil
}

// infoField returns a reader of the fields of an INFO reply.
func infoField(info string, err error) func(name string) (string, error) {
	return func(name string) (string, error) {
		if err != nil {
			return "", err
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok && v != "" {
				return v, nil
			}
		}
		return "", fmt.Errorf("redlock: no %s in INFO server", name)
	}
}
