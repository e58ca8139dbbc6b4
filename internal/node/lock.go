package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
)

// The operations of a lock's life: acquire, fence, extend, release.

// Acquire takes the lock: it sets Key to Token with the TTL if Key does not
// exist (a reentrant lock also takes one more hold when Token already owns
// it). A node answers OK when Key now holds Token, including when an
// earlier try of the same command, resent by the client, had set it;
// otherwise it says, where it can, which value holds Key. Its Value is a
// Grant when there is a holder or a counter to report.
type Acquire struct {
	Key string
	// Token is the acquisition's random token (a reentrant lock's hash
	// field: its holds are counted under it).
	Token     string
	TTL       time.Duration
	Reentrant bool
	// Reenter marks a reentrant acquisition by an owner that already holds
	// the lock: it never creates the key.
	Reenter bool
	// FenceKey is the name's fencing counter, "" when the lock is not
	// fenced: the node then reads it in the same atomic step.
	FenceKey string
	// MinUptime, when positive, is the least uptime in whole seconds at
	// which a node may grant; a node up for less changes nothing and
	// answers an error wrapping ErrNodeRecovering.
	MinUptime int64
	// Also are more names taken with Key, all or none, for the same
	// Token: a multi-name lock (plain only: not reentrant, not fenced).
	Also []string
	// Intent, when set, makes this the write acquisition of a
	// reader-writer lock: live readers refuse it, and a refused writer
	// marks itself waiting at Intent (see IntentKey) so that no new reader
	// gets in. Writer is the writer's id, the same for all its attempts:
	// the mark's value; IntentTTL how long the mark lasts.
	Intent, Writer string
	IntentTTL      time.Duration
	// Ack, when set, makes a grant count only once replicas have it.
	Ack Ack
	// Clock asks a plain lock's grant (acquire_plain.lua) for the node's
	// time. Without it the grant carries none once the node has answered
	// a TIME (see clockFor): the clock guard asks for a fresh reading only
	// as often as it needs one. Every other grant carries the time always.
	Clock bool
	enc   encoding
	nenc  encoding // SET NX GET PX (see native.go)
}

// Grant is what an Acquire's reply says beyond OK: the value that holds
// the key when it was refused ("" when unknown), and the fencing counter
// read with the grant or refusal (0 when not fenced).
type Grant struct {
	Holder  string
	Counter uint64
}

// GrantOf returns what rep, an Acquire's reply, says beyond OK.
func GrantOf(rep Reply) Grant {
	g, _ := rep.Value.(Grant)
	return g
}

// Name implements Op.
func (*Acquire) Name() string { return "acquire" }

// Lane implements Laned: the lock's name.
func (o *Acquire) Lane() string { return o.Key }

// Encode implements Op.
func (o *Acquire) Encode(ctx context.Context, l Layout, cmds []redis.Cmder) []redis.Cmder {
	return o.Ack.encode(ctx, o.encode(ctx, l, cmds))
}

// Decode implements Op.
func (o *Acquire) Decode(cmds []redis.Cmder) Reply {
	return o.Ack.check(cmds, o.decode(o.Ack.ops(cmds)))
}

// encode appends the acquisition's command.
func (o *Acquire) encode(ctx context.Context, l Layout, cmds []redis.Cmder) []redis.Cmder {
	if len(o.Also) > 0 {
		return append(cmds, o.encodeMulti(ctx))
	}
	args := o.enc.args(l, func() []any { return o.scriptArgs(l) })
	return append(cmds, shared(ctx, args))
}

// scriptArgs is the acquisition's script command for layout l.
func (o *Acquire) scriptArgs(l Layout) []any {
	ttl := o.TTL.Milliseconds()
	switch {
	case o.Reentrant:
		again := "0"
		if o.Reenter {
			again = "1"
		}
		return evalArgs(scripts.AcquireReentrant, l.keys(o.Key, o.FenceKey), o.Token, ttl, again, o.MinUptime)
	case o.Intent != "":
		keys := append(l.keys(o.Key, o.Intent), l.keys(o.Key, o.FenceKey)[1:]...)
		return evalArgs(scripts.WriteAcquire, keys, o.Token, ttl, o.MinUptime, o.Writer, o.IntentTTL.Milliseconds())
	case o.FenceKey != "" || o.MinUptime > 0:
		return evalArgs(scripts.Acquire, l.keys(o.Key, o.FenceKey), o.Token, ttl, o.MinUptime)
	}
	// A script rather than SET key token NX GET PX ttl, which does the
	// same: its reply is nil on a grant, which go-redis turns into an
	// error that costs the client far more than the script costs the node.
	clock := "0"
	if o.Clock {
		clock = "1"
	}
	return evalArgs(scripts.AcquirePlain, []string{o.Key}, o.Token, ttl, clock)
}

// ownClock reports whether the acquisition's script answers a grant with
// the node's time (acquire_plain.lua), when asked (Clock): the batch that
// carries it needs no TIME of its own for it (see clockFor).
func (o *Acquire) ownClock() bool {
	if o.Intent != "" { // write_acquire.lua
		return o.FenceKey == "" && !o.Reentrant
	}
	return len(o.Also) == 0 && !o.Reentrant && o.FenceKey == "" && o.MinUptime == 0
}

// Clocked reports whether the reply to o carries the node's time: always,
// except a plain grant not asked for it (Clock) on a node that answered a
// TIME before (see clockFor).
func (o *Acquire) Clocked() bool { return o.Clock || o.Intent != "" || !o.ownClock() }

// granted is the Reply of a script's grant that answers with the node's
// time in Unix milliseconds, or 1 when the user may not run TIME (or a
// plain grant was not asked for it, see Acquire.Clock).
func granted(ms int64) Reply {
	if ms > 1 {
		return Reply{OK: true, Time: time.UnixMilli(ms)}
	}
	return Reply{OK: ms == 1}
}

// decode reads the acquisition's reply.
func (o *Acquire) decode(cmds []redis.Cmder) Reply {
	cmd := cmds[0].(*redis.Cmd)
	if err := cmd.Err(); err != nil {
		return Reply{Err: err}
	}
	if o.Reentrant || o.FenceKey != "" || o.Intent != "" || (o.MinUptime > 0 && len(o.Also) == 0) {
		return o.decodeScript(cmd)
	}
	// acquire_plain.lua: the node's time (Unix ms) granted, and
	// acquire_multi.lua: 1 granted; either: a competitor's token, or 0 for
	// a reentrant lock. acquire_multi.lua answers a node that restarted too
	// recently as acquire.lua does.
	switch v := cmd.Val().(type) {
	case int64:
		if v >= 1 {
			return granted(v)
		}
		return Reply{}
	case string:
		return Reply{Value: Grant{Holder: v}} // the script answers 1 for this token's own
	case []any:
		return o.decodeScript(cmd)
	}
	return Reply{Err: fmt.Errorf("redlock: unexpected acquire reply %v", cmd.Val())}
}

// decodeScript reads an acquire script's {status, counter[, holder]}.
func (o *Acquire) decodeScript(cmd *redis.Cmd) Reply {
	if v, ok := cmd.Val().(int64); ok && v >= 1 {
		rep := granted(v) // write_acquire.lua's grant without fencing
		rep.Value = Grant{}
		return rep
	}
	r, err := slice(cmd, 2)
	if err != nil {
		return Reply{Err: fmt.Errorf("redlock: unexpected acquire reply: %w", err)}
	}
	status, ok1 := r[0].(int64)
	text, ok2 := r[1].(string)
	if !ok1 || !ok2 {
		return Reply{Err: fmt.Errorf("redlock: unexpected acquire reply %v", r)}
	}
	if status < 0 {
		return Reply{Err: fmt.Errorf("%w: up %ss, less than the restart delay %ds", ErrNodeRecovering, text, o.MinUptime)}
	}
	counter, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		// Granted or not, the counter is unusable: an error makes the
		// attempt release this node if it granted.
		return Reply{Err: fmt.Errorf("redlock: fencing counter %s is not a number: %w", o.FenceKey, err)}
	}
	g := Grant{Counter: counter}
	if len(r) > 2 && status <= 0 {
		g.Holder, _ = r[2].(string)
	}
	return Reply{OK: status > 0, Value: g}
}

// Fence raises the name's fencing counter to Fence (never lowers it) and
// asks whether Key still holds Token: OK when it does.
type Fence struct {
	Key, Token, FenceKey string
	Fence                uint64
	Reentrant            bool
	// Ack, when set, makes the recorded token count only once replicas
	// have it.
	Ack Ack
}

// Name implements Op.
func (*Fence) Name() string { return "fence" }

// Lane implements Laned: the lock's name.
func (o *Fence) Lane() string { return o.Key }

// Encode implements Op.
func (o *Fence) Encode(ctx context.Context, l Layout, cmds []redis.Cmder) []redis.Cmder {
	return o.Ack.encode(ctx, o.encode(ctx, l, cmds))
}

// Decode implements Op.
func (o *Fence) Decode(cmds []redis.Cmder) Reply { return o.Ack.check(cmds, one(o.Ack.ops(cmds))) }

// encode appends the fencing script.
func (o *Fence) encode(ctx context.Context, l Layout, cmds []redis.Cmder) []redis.Cmder {
	reentrant := "0"
	if o.Reentrant {
		reentrant = "1"
	}
	return append(cmds, script(ctx, scripts.Fence, l.keys(o.Key, o.FenceKey), o.Token, o.Fence, reentrant))
}

// Extend sets Key's time to live if Key holds Token (OK); it never
// creates Key.
type Extend struct {
	Key, Token string
	TTL        time.Duration
	Reentrant  bool
	// Also are the other names of a multi-name lock: OK only when every
	// name holds Token, and then every one is extended.
	Also []string
	// Ack, when set, makes the extension count only once replicas have it.
	Ack  Ack
	enc  encoding
	nenc encoding // SET IFEQ PX (see native.go)
}

// Name implements Op.
func (*Extend) Name() string { return "extend" }

// Lane implements Laned: the lock's name.
func (o *Extend) Lane() string { return o.Key }

// Encode implements Op.
func (o *Extend) Encode(ctx context.Context, l Layout, cmds []redis.Cmder) []redis.Cmder {
	return o.Ack.encode(ctx, o.encode(ctx, l, cmds))
}

// Decode implements Op.
func (o *Extend) Decode(cmds []redis.Cmder) Reply { return o.Ack.check(cmds, one(o.Ack.ops(cmds))) }

// encode appends the extension's script.
func (o *Extend) encode(ctx context.Context, _ Layout, cmds []redis.Cmder) []redis.Cmder {
	s := scripts.Extend
	switch {
	case o.Reentrant:
		s = scripts.ExtendReentrant
	case len(o.Also) > 0:
		s = scripts.ExtendMulti
	}
	args := o.enc.args(Layout{}, func() []any { return evalArgs(s, allKeys(o.Key, o.Also), o.Token, o.TTL.Milliseconds()) })
	return append(cmds, shared(ctx, args))
}

// one reads the integer reply of a single command: OK when it is 1.
func one(cmds []redis.Cmder) Reply {
	v, err := cmds[0].(*redis.Cmd).Int64()
	return Reply{OK: err == nil && v == 1, Err: err}
}

// slice returns a script's array reply of at least n elements.
func slice(cmd redis.Cmder, n int) ([]any, error) {
	if err := cmd.Err(); err != nil {
		return nil, err
	}
	sc, ok := cmd.(*redis.Cmd)
	if !ok {
		return nil, fmt.Errorf("redlock: unexpected command %T", cmd)
	}
	r, err := sc.Slice()
	if err != nil {
		return nil, err
	}
	if len(r) < n {
		return nil, errors.New("redlock: unexpected script reply")
	}
	return r, nil
}
