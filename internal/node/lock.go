package node

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redlock-go/redlock/internal/scripts"
)

// A lock's acquisition, fence and extension (its release is in
// release.go), whatever its Shape (see shape.go): each shape's script and
// reply are stated in the operation's args and Decode.

// Grant is what an acquisition's reply says beyond OK: the value that
// holds the key when it was refused ("" when unknown), and the fencing
// counter read with the grant or refusal (0 when not fenced).
type Grant struct {
	Holder  string
	Counter uint64
}

// GrantOf returns what rep, an acquisition's reply, says beyond OK.
func GrantOf(rep Reply) Grant {
	g, _ := rep.Value.(Grant)
	return g
}

// Acquire takes a lock of Shape for Token, for the TTL. A node answers OK
// when Token holds it now, and otherwise says, where it can, why not:
//
//   - Plain sets Key to Token if Key does not exist. OK when Key now holds
//     Token, including when an earlier try of the same command, resent by
//     the client, had set it (or a release handed the lock over to
//     Token); a refusal names the value that holds Key. Its Value is a
//     Grant when there is a holder or a counter to report.
//   - Reentrant takes the first hold when Key does not exist, one more
//     when Token owns it (only that when Reenter); each re-arms the TTL.
//     It answers as Plain does, naming the owner that holds the lock (the
//     hash's one field); a lock of another kind is refused unnamed.
//   - Multi takes Key and the names Also, all or none, as Plain takes
//     one: the first name held by another refuses, naming its holder
//     where it can.
//   - Write takes a reader-writer lock's write lock: live readers refuse
//     it, and a refused writer marks itself waiting at Intent (see
//     IntentKey) so that no new reader gets in; otherwise it answers as
//     Plain does.
//   - Read takes a read hold of the reader-writer lock Key, and Semaphore
//     one of Permits permits of the semaphore Key. OK when Token holds
//     one now, including when an earlier try of the same command, resent
//     by the client, had taken it (its expiry is then re-armed). A
//     refusal's Value is a ReadRefusal, a permit's reply's a SemGrant.
type Acquire struct {
	Key, Token string
	TTL        time.Duration
	Shape      Shape
	// FenceKey is the name's fencing counter, "" when the lock is not
	// fenced: the node then reads it in the same atomic step (Plain,
	// Reentrant and Write only).
	FenceKey string
	// MinUptime, when positive, is the least uptime in whole seconds at
	// which a node may grant; a node up for less changes nothing and
	// answers an error wrapping ErrNodeRecovering.
	MinUptime int64
	// Ack, when set, makes a grant count only once replicas have it.
	Ack Ack
	// Clock asks a Plain grant (acquire_plain.lua) for the node's time.
	// Without it the grant carries none once the node has answered a TIME
	// (see clockFor): the clock guard asks for a fresh reading only as
	// often as it needs one. A fenced or restart-delayed grant, and every
	// other shape's, carries the time always.
	Clock bool
	// Reenter marks a Reentrant acquisition by an owner that already
	// holds the lock: it never creates the key.
	Reenter bool
	// Also are a Multi lock's names after Key.
	Also []string
	// Intent is where a Write lock's waiting mark is kept, Writer the
	// writer's id, the same for all its attempts: the mark's value;
	// IntentTTL how long the mark lasts.
	Intent, Writer string
	IntentTTL      time.Duration
	// Permits is a Semaphore's permit count.
	Permits int
	enc     encoding
	nenc    encoding // SET NX GET PX (see native.go)
}

// Name implements Op.
func (o *Acquire) Name() string { return shapes[o.Shape].acquire }

// Lane implements Laned: the lock's name.
func (o *Acquire) Lane() string { return o.Key }

// Concurrent implements Concurrent, by the acquisition's Shape.
func (o *Acquire) Concurrent() (string, bool) { return holder(o.Shape, o.Token) }

// HoldsAgain reports whether op takes one more hold on a lock its caller
// holds already (a reentrant lock's owner locking again): its undo drops
// one hold, which on a node that op never reached is a hold the caller
// had, so that it is undone only where it surely applied.
func HoldsAgain(op Op) bool {
	a, ok := op.(*Acquire)
	return ok && a.Shape == Reentrant && a.Reenter
}

// Encode implements Op.
func (o *Acquire) Encode(l Layout, cmds []Cmd) []Cmd {
	return o.Ack.encode(append(cmds, Cmd{Args: o.enc.args(l, o.args)}))
}

// args is the script of o's Shape, with its keys and arguments for a node
// laid out as l.
func (o *Acquire) args(l Layout) []any {
	ttl := o.TTL.Milliseconds()
	switch o.Shape {
	case Reentrant:
		return evalArgs(scripts.AcquireReentrant, l.keys(o.Key, o.FenceKey), o.Token, ttl, flag(o.Reenter), o.MinUptime)
	case Multi:
		return evalArgs(scripts.AcquireMulti, allKeys(o.Key, o.Also), o.Token, ttl, o.MinUptime)
	case Write:
		keys := append(l.keys(o.Key, o.Intent), l.keys(o.Key, o.FenceKey)[1:]...)
		return evalArgs(scripts.WriteAcquire, keys, o.Token, ttl, o.MinUptime, o.Writer, o.IntentTTL.Milliseconds())
	case Read:
		return evalArgs(scripts.ReadAcquire, l.keys(o.Key, IntentKey(o.Key)), o.Token, ttl, o.MinUptime)
	case Semaphore:
		return evalArgs(scripts.SemAcquire, l.keys(o.Key, PermitsKey(o.Key)), o.Token, ttl, o.Permits, o.MinUptime)
	}
	if !o.plain() {
		return evalArgs(scripts.Acquire, l.keys(o.Key, o.FenceKey), o.Token, ttl, o.MinUptime)
	}
	// A script rather than SET key token NX GET PX ttl, which does the
	// same: its reply is nil on a grant, which go-redis turns into an
	// error that costs the client far more than the script costs the node.
	return evalArgs(scripts.AcquirePlain, []string{o.Key}, o.Token, ttl, flag(o.Clock))
}

// plain reports whether o is a Plain lock neither fenced nor
// restart-delayed: what acquire_plain.lua and SET NX GET PX grant alone.
func (o *Acquire) plain() bool { return o.Shape == Plain && o.FenceKey == "" && o.MinUptime <= 0 }

// Clocked reports whether the reply to o carries the node's time: always,
// except a plain grant not asked for it (Clock) on a node that answered a
// TIME before (see clockFor).
func (o *Acquire) Clocked() bool { return o.Clock || !o.plain() }

// Decode implements Op: a plain grant's reply as acquire_plain.lua's (so
// is a Multi lock's, but from a node that restarted too recently), a
// reader's and a permit's as their own scripts', every other as
// acquire.lua's.
func (o *Acquire) Decode(cmds []Cmd) Reply {
	cmd := &cmds[0]
	switch _, array := cmd.Val().([]any); {
	case o.Shape == Read:
		return o.Ack.check(cmds, decodeReader(cmd, o.MinUptime))
	case o.Shape == Semaphore:
		return o.Ack.check(cmds, o.decodePermit(cmd))
	case o.plain(), o.Shape == Multi && !array:
		return o.Ack.check(cmds, decodeHolder(cmd))
	}
	return o.Ack.check(cmds, decodeGrant(cmd, o.MinUptime, o.FenceKey))
}

// decodeHolder reads the reply of acquire_plain.lua, and of
// acquire_multi.lua but from a node up less than its restart delay: the
// node's time (Unix ms) or 1 granted; a competitor's token, or 0 for a
// lock of another kind, refused.
func decodeHolder(cmd *Cmd) Reply {
	if err := cmd.Err(); err != nil {
		return Reply{Err: err}
	}
	switch v := cmd.Val().(type) {
	case int64:
		if v >= 1 {
			return granted(v)
		}
		return Reply{}
	case string:
		return Reply{Value: Grant{Holder: v}} // the script answers 1 for this token's own
	}
	return Reply{Err: fmt.Errorf("redlock: unexpected acquire reply %v", cmd.Val())}
}

// granted is the Reply of a script's grant that answers with the node's
// time in Unix milliseconds, or 1 when the user may not run TIME (or a
// plain grant was not asked for it, see Acquire.Clock).
func granted(ms int64) Reply {
	if ms > 1 {
		return Reply{OK: true, Time: time.UnixMilli(ms)}
	}
	return Reply{OK: ms == 1}
}

// decodeGrant reads an acquire script's {status, counter[, holder]}, or a
// grant's time (write_acquire.lua without fencing), for an acquisition
// with a restart delay of minUptime seconds and fencing counter fenceKey.
func decodeGrant(cmd *Cmd, minUptime int64, fenceKey string) Reply {
	if err := cmd.Err(); err != nil {
		return Reply{Err: err}
	}
	if v, ok := cmd.Val().(int64); ok && v >= 1 {
		rep := granted(v)
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
		return Reply{Err: fmt.Errorf("%w: up %ss, less than the restart delay %ds", ErrNodeRecovering, text, minUptime)}
	}
	counter, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		// Granted or not, the counter is unusable: an error makes the
		// attempt release this node if it granted.
		return Reply{Err: fmt.Errorf("redlock: fencing counter %s is not a number: %w", fenceKey, err)}
	}
	g := Grant{Counter: counter}
	if len(r) > 2 && status <= 0 {
		g.Holder, _ = r[2].(string)
	}
	return Reply{OK: status > 0, Value: g}
}

// Fence raises the name's fencing counter to Fence (never lowers it) and
// asks whether Key still holds Token as a plain lock, or, when Reentrant,
// whether Token owns Key as a reentrant lock: OK when it does.
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
func (o *Fence) Encode(l Layout, cmds []Cmd) []Cmd {
	return o.Ack.encode(append(cmds, script(scripts.Fence, l.keys(o.Key, o.FenceKey), o.Token, o.Fence, flag(o.Reentrant))))
}

// Decode implements Op.
func (o *Fence) Decode(cmds []Cmd) Reply { return o.Ack.check(cmds, one(o.Ack.ops(cmds))) }

// Extend re-arms Token's hold of Key for TTL if Token still holds it as a
// lock of Shape (OK); it never creates Key nor admits anyone. A Multi
// lock's extends every name Also with Key, or none. Its Shape is never
// Write: a reader-writer lock's writer extends its lock as a Plain one.
type Extend struct {
	Key, Token string
	TTL        time.Duration
	Shape      Shape
	// Also are a Multi lock's names after Key.
	Also []string
	// Ack, when set, makes the extension count only once replicas have it.
	Ack  Ack
	enc  encoding
	nenc encoding // SET IFEQ PX (see native.go)
}

// Name implements Op.
func (o *Extend) Name() string { return shapes[o.Shape].extend }

// Lane implements Laned: the lock's name.
func (o *Extend) Lane() string { return o.Key }

// Concurrent implements Concurrent, by the extension's Shape.
func (o *Extend) Concurrent() (string, bool) { return holder(o.Shape, o.Token) }

// Encode implements Op.
func (o *Extend) Encode(l Layout, cmds []Cmd) []Cmd {
	return o.Ack.encode(append(cmds, Cmd{Args: o.enc.args(l, o.args)}))
}

// args is the script of o's Shape, with its keys, for a node laid out as
// l: every shape's arguments are the token and the TTL.
func (o *Extend) args(l Layout) []any {
	s, keys := scripts.Extend, []string{o.Key}
	switch o.Shape {
	case Reentrant:
		s = scripts.ExtendReentrant
	case Multi:
		s, keys = scripts.ExtendMulti, allKeys(o.Key, o.Also)
	case Read:
		s = scripts.ReadExtend
	case Semaphore:
		s, keys = scripts.SemExtend, l.keys(o.Key, PermitsKey(o.Key))
	}
	return evalArgs(s, keys, o.Token, o.TTL.Milliseconds())
}

// Decode implements Op: every shape's script answers 1 when it extended.
func (o *Extend) Decode(cmds []Cmd) Reply { return o.Ack.check(cmds, one(o.Ack.ops(cmds))) }

// one reads the integer reply of a single command: OK when it is 1.
func one(cmds []Cmd) Reply {
	v, err := cmds[0].Int()
	return Reply{OK: err == nil && v == 1, Err: err}
}

// slice returns a script's array reply of at least n elements.
func slice(cmd *Cmd, n int) ([]any, error) {
	if err := cmd.Err(); err != nil {
		return nil, err
	}
	r, err := cmd.Slice()
	if err != nil {
		return nil, err
	}
	if len(r) < n {
		return nil, errors.New("redlock: unexpected script reply")
	}
	return r, nil
}
