package node

import (
	"context"
	"errors"
	"strings"

	"github.com/redlock-go/redlock/internal/scripts"
)

// The plain lock in the server's own words. A node without scripts
// carries a plain lock's operations as single commands where the server
// has them, batched with the node's other operations (send, exchange) as
// scripts are, rather than on a connection of their own:
//
//   - acquisition: SET key token NX GET PX ttl, on every server (what
//     acquire_plain.lua runs);
//   - extension: SET key token IFEQ token PX ttl (Valkey 8.1, Redis 8.4):
//     set only when the key holds the token, as extend.lua's GET then
//     PEXPIRE;
//   - release: DELIFEQ key token (Valkey 9.0) or DELEX key IFEQ token
//     (Redis 8.4), then PUBLISH to every waiter, as Release.native.
//
// Each reads its reply as the script's Decode does. The rare answers a
// single command cannot give (a key of another type, a release that found
// nothing to delete: is the key there at all?) are asked after the round
// trip, on a connection of their own, as the transactions path asks them.
// Fenced, restart-delayed, reentrant, multi-name and reader-writer
// operations keep their transactions (or need scripts).

// nativeOp is an Op that a node without scripts may carry in the server's
// own commands.
type nativeOp interface {
	Op
	// encodeNative appends the operation's commands for a node that
	// speaks s; ok is false when it has none there.
	encodeNative(s speech, cmds []Cmd) (out []Cmd, ok bool)
	// decodeNative reads their replies once the round trip is over: the
	// reply, or (more not nil) what is still to ask on a connection of
	// its own to answer as the script does.
	decodeNative(cmds []Cmd) (rep Reply, more func(ctx context.Context, t *Tx) Reply)
}

// speech is how a node without scripts speaks: its way and its Caps.
type speech struct {
	way  Way
	caps Caps
}

// deletes reports whether a plain release is the server's own
// compare-and-delete: a Native node that has one, or whose way was set
// without a probe (DELEX, see SetWay).
func (s speech) deletes() bool { return s.way == Native && (s.caps.Deletes() || !s.caps.Known) }

// setsIfEq reports whether a plain extension is SET ... IFEQ ... PX: on a
// Native node that has it, and beside scripts.
func (s speech) setsIfEq() bool { return (s.way == Native || s.way == Scripts) && s.caps.SetIfEq }

// beside reports whether a node that speaks scripts carries the plain
// lock's grant in the server's own SET NX GET PX (Redis 7.0, every
// Valkey) and, where it has SET IFEQ (Valkey 8.1, Redis 8.4), its
// extension in SET IFEQ PX: they cost the server a fraction of their
// scripts (measured: see docs/PERFORMANCE.md and DEPLOYMENTS.md). Its
// release keeps its script, which hands the lock over to the oldest
// queued waiter; a grant that finds the token handed over re-arms it by
// script (see Acquire.rearm).
func (s speech) beside() bool { return s.way == Scripts && s.caps.SetNXGet() }

func (o *Acquire) encodeNative(s speech, cmds []Cmd) ([]Cmd, bool) {
	if !o.plain() || s.way == Scripts && !s.beside() {
		return cmds, false
	}
	args := o.nenc.at(0, func() []any { return []any{"set", o.Key, o.Token, "nx", "get", "px", o.TTL.Milliseconds()} })
	return o.Ack.encode(append(cmds, Cmd{Args: args, Expect: ExpectText})), true
}

func (o *Acquire) decodeNative(cmds []Cmd) (Reply, func(context.Context, *Tx) Reply) {
	set := &cmds[0]
	if errors.Is(set.Err(), ErrNil) {
		// Granted: as acquire_plain.lua's, the reply says no more.
		return o.Ack.check(cmds[1:], Reply{OK: true}), nil
	}
	rep, wrongType := o.granted(set.Val(), set.Err(), 0)
	switch {
	case wrongType:
		return Reply{}, func(ctx context.Context, t *Tx) Reply { return t.refusedByType(ctx, o.Key, rep) }
	case rep.OK:
		// The key held the token already: a release handed the lock over
		// to it, or the client resent the SET. SET NX left its TTL as it
		// was, which may end before the validity that counts from this
		// attempt: re-armed, as acquire_plain.lua re-arms it.
		return Reply{}, o.rearm
	}
	return o.Ack.check(cmds[1:], rep), nil
}

// rearm re-arms the key of a grant that found it holding the token
// already, for the grant's TTL, if it still holds it (then acknowledged
// as a grant is): beside scripts by acquire_plain.lua, whose grant of a
// key that holds the token re-arms it, since the node's user may not run
// WATCH (the documented ACL line has scripts and no WATCH); else in an
// optimistic transaction.
func (o *Acquire) rearm(ctx context.Context, t *Tx) Reply {
	if t.way == Scripts {
		return o.rearmByScript(ctx, t)
	}
	return t.Watch(ctx, o.Key, func(s *Step) (Reply, error) {
		get := NewText("get", o.Key)
		if err := s.Read(ctx, []string{o.Key}, get); err != nil {
			return Reply{}, err
		}
		if get.Str() != o.Token {
			return Reply{Value: Grant{Holder: get.Str()}}, nil // released or taken meanwhile
		}
		after := o.Ack.encode(nil)
		if _, err := s.Exec(ctx, [][]any{{"pexpire", o.Key, o.TTL.Milliseconds()}}, refs(after)...); err != nil {
			return Reply{}, err
		}
		return o.Ack.check(after, Reply{OK: true, Value: Grant{}}), nil
	})
}

// rearmByScript is rearm on a node that speaks scripts: the script of a
// plain grant, by hash, then by its source if the node lost it (NOSCRIPT:
// a restart or failover since the grant), on one connection with the
// WAIT that acknowledges it. Its reply carries the node's time read after
// the TTL was armed, as every vote's does (see internal/turn/turn.go).
func (o *Acquire) rearmByScript(ctx context.Context, t *Tx) Reply {
	send := func(eval bool) ([]Cmd, error) {
		cmds := o.Ack.encode([]Cmd{script(scripts.AcquirePlain, []string{o.Key}, o.Token, o.TTL.Milliseconds(), "1")})
		if eval {
			spellOut(cmds)
		}
		return cmds, t.Pipelined(ctx, o.Key, refs(cmds)...)
	}
	cmds, err := send(false)
	if _, noScript := evalOf(&cmds[0]); err == nil && noScript {
		cmds, err = send(true)
	}
	if err != nil {
		return Reply{Err: err}
	}
	rep := decodeHolder(&cmds[0])
	if rep.OK {
		rep.Value = Grant{}
	}
	return o.Ack.check(cmds, rep)
}

func (o *Extend) encodeNative(s speech, cmds []Cmd) ([]Cmd, bool) {
	if !shapes[o.Shape].native || !s.setsIfEq() {
		return cmds, false
	}
	args := o.nenc.at(0, func() []any { return []any{"set", o.Key, o.Token, "ifeq", o.Token, "px", o.TTL.Milliseconds()} })
	return o.Ack.encode(append(cmds, Cmd{Args: args, Expect: ExpectText})), true
}

// decodeNative reads SET ... IFEQ: OK when the key held the token (and
// now has the new time to live), nil when it did not; a key of another
// type is not the caller's (extend.lua answers 0).
func (o *Extend) decodeNative(cmds []Cmd) (Reply, func(context.Context, *Tx) Reply) {
	err := cmds[0].Err()
	switch {
	case errors.Is(err, ErrNil):
		return Reply{}, nil
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return Reply{}, nil
	case err != nil:
		return Reply{Err: err}, nil
	}
	return o.Ack.check(cmds[1:], Reply{OK: true}), nil
}

func (o *Release) encodeNative(s speech, cmds []Cmd) ([]Cmd, bool) {
	if !shapes[o.Shape].native || !s.deletes() {
		return cmds, false
	}
	var del []any
	if s.caps.DelIfEq {
		del = o.nenc.at(0, func() []any { return []any{"delifeq", o.Key, o.Token} })
	} else {
		del = o.nenc.at(1, func() []any { return []any{"delex", o.Key, "ifeq", o.Token} })
	}
	cmds = append(cmds, Cmd{Args: del, Expect: ExpectInt})
	if o.Channel != "" {
		// To every waiter (announce.lua's Notice): the delete cannot pop
		// the queue's oldest in the same step.
		pub := o.pub.at(0, func() []any { return []any{"publish", o.Channel, Notice{ID: o.Token}.String()} })
		cmds = append(cmds, Cmd{Args: pub, Expect: ExpectInt})
	}
	// Whether the key is there, read right after the delete in the same
	// round trip (release.lua reads it in the same step): a delete that
	// deleted nothing answers "gone" or "taken" by it.
	exists := o.pub.at(1, func() []any { return []any{"exists", o.Key} })
	return append(cmds, Cmd{Args: exists, Expect: ExpectInt}), true
}

// decodeNative reads the compare-and-delete, the announcement and the
// EXISTS after them. A delete refused with an error reply (a key of
// another type, a reentrant lock: the words differ between servers) is
// read again by the transaction; one that deleted nothing answers as
// release.lua does by whether the key was there: "taken" or "gone", with
// the server's run id still to ask (see Redis.askAbsent).
func (o *Release) decodeNative(cmds []Cmd) (Reply, func(context.Context, *Tx) Reply) {
	del := &cmds[0]
	var pub *Cmd
	if o.Channel != "" {
		pub = &cmds[1]
	}
	n, err := del.Int()
	switch {
	case err != nil && isReply(err):
		return Reply{}, o.watched
	case err != nil:
		return Reply{Err: err}, nil
	case n == 1 && pub != nil && pub.Num() > 0:
		return Reply{OK: true, Value: heard(pub, "")}, nil
	case n == 1:
		return Reply{OK: true}, nil // heard by no one: release.lua's 1
	}
	v, err := cmds[len(cmds)-1].Int()
	switch {
	case err != nil:
		return Reply{Err: err}, nil
	case o.Channel == "":
		return absentReply(o, v > 0, ""), nil // an undo reads no server
	}
	return Reply{Value: absent{other: v > 0}}, nil
}

// absent is the Value of a native release's reply that deleted nothing:
// other says whether the key was another's (else it was not there at
// all). The answer still needs the server's run id.
type absent struct{ other bool }

// isAbsent reports whether rep is a native release's that deleted nothing.
func isAbsent(rep Reply) bool {
	_, ok := rep.Value.(absent)
	return ok
}

// absent answers a release whose compare-and-delete deleted nothing, with
// a, what the EXISTS after it read, and the run id of the key's server,
// asked on a connection of its own.
func (o *Release) absent(ctx context.Context, t *Tx, a absent) Reply {
	return t.Watch(ctx, o.Key, func(s *Step) (Reply, error) { return gone(ctx, s, o.Channel != "", a.other) })
}

// transactNative carries op, which has a native form for t, on a
// connection of its own: its commands in one round trip, then what its
// reply still needs.
func transactNative(ctx context.Context, t *Tx, op nativeOp, key string) (Reply, bool) {
	cmds, ok := op.encodeNative(t.speech, nil)
	if !ok {
		return Reply{}, false
	}
	if err := t.Pipelined(ctx, key, refs(cmds)...); err != nil {
		return Reply{Err: err}, true
	}
	rep, more := op.decodeNative(cmds)
	switch r, ok := op.(*Release); {
	case more != nil:
		return more(ctx, t), true
	case ok && isAbsent(rep):
		return r.absent(ctx, t, rep.Value.(absent)), true
	}
	return rep, true
}
