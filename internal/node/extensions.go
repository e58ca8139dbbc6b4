package node

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/scripts"
)

// Extensions is several plain extensions in one request: renewal's, of the
// locks whose extensions fell due together (redlock/internal/lease). Each
// is judged exactly as its Extend alone would be, and answered in its own
// element of the Reply's Value, an []Reply in the order of Each; the Reply
// itself is OK when any was, and its Err is the node's failure that voids
// them all. On one server it is one command: extend_many.lua, or one
// SET IFEQ each where the server has it (see native.go). Each Extend goes
// as its own call, and answers as it does alone (see split): on a sharded
// node (Cluster, Ring: the keys may live on different servers); without
// scripts otherwise (each its own transaction, side by side by name, not
// one after the other on one connection); after an error reply to the
// script (one key the ACL denies fails that key alone); and, for a key
// whose GET failed in the script, that Extend (whose reply says why).
//
// Each must hold extensions that are each Together.
type Extensions struct {
	Each []*Extend
	enc  encoding
}

// Together reports whether e may travel in Extensions: a plain extension,
// of one name, without WAIT.
func Together(e *Extend) bool { return e.Shape == Plain && len(e.Also) == 0 && e.Ack.Replicas <= 0 }

// Name implements Op.
func (o *Extensions) Name() string { return shapes[Plain].extend }

// Timed implements Timed: each extension is a vote.
func (*Extensions) Timed() {}

// Encode implements Op: one extend_many.lua (Do splits a sharded node's).
func (o *Extensions) Encode(l Layout, cmds []Cmd) []Cmd {
	return append(cmds, Cmd{Args: o.enc.args(l, o.args)})
}

// args is the EVALSHA of extend_many.lua: each key, then each token and
// TTL.
func (o *Extensions) args(Layout) []any {
	args := make([]any, 0, 3+3*len(o.Each))
	args = append(args, evalsha, shas[scripts.ExtendMany], len(o.Each))
	for _, e := range o.Each {
		args = append(args, e.Key)
	}
	for _, e := range o.Each {
		args = append(args, e.Token, e.TTL.Milliseconds())
	}
	return args
}

// errGetFailed is an extension's reply when extend_many.lua's GET of its
// key failed with an error other than WRONGTYPE (extend.lua alone would
// answer that error).
var errGetFailed = errors.New("redlock: the extension's GET failed in extend_many.lua")

// Decode implements Op: 1, 0 or -1 per key (see extend_many.lua).
func (o *Extensions) Decode(cmds []Cmd) Reply {
	vals, err := slice(&cmds[0], len(o.Each))
	if err != nil {
		return Reply{Err: err}
	}
	each := make([]Reply, len(o.Each))
	ok := false
	for i, v := range vals[:len(o.Each)] {
		switch n, _ := v.(int64); n {
		case 1:
			each[i].OK, ok = true, true
		case 0:
		default:
			each[i].Err = fmt.Errorf("%w (%s)", errGetFailed, o.Each[i].Key)
		}
	}
	return Reply{OK: ok, Value: each}
}

// encodeNative implements nativeOp: one SET IFEQ each, where the server
// has it.
func (o *Extensions) encodeNative(s speech, cmds []Cmd) ([]Cmd, bool) {
	if !s.setsIfEq() {
		return cmds, false
	}
	for _, e := range o.Each {
		cmds, _ = e.encodeNative(s, cmds)
	}
	return cmds, true
}

// decodeNative implements nativeOp: each SET IFEQ read as its Extend
// reads it.
func (o *Extensions) decodeNative(cmds []Cmd) (Reply, func(context.Context, *Tx) Reply) {
	each := make([]Reply, len(o.Each))
	for i, e := range o.Each {
		each[i], _ = e.decodeNative(cmds[i : i+1])
	}
	return joined(each), nil
}

// joined is the Reply of Extensions whose extensions answered each: OK
// when any was; failed, with the first's error, when every one failed.
func joined(each []Reply) Reply {
	rep := Reply{Value: each, Err: each[0].Err}
	for _, r := range each {
		rep.OK = rep.OK || r.OK
		if r.Err == nil {
			rep.Err = nil
		}
		if rep.Time.IsZero() {
			rep.Time = r.Time
		}
	}
	return rep
}

// DoEach sends each extension of o as its own call through do, and
// answers o through done once every one answered: a sharded node's, and a
// fake node's (nodetest), which so answers each as it answers an Extend.
func DoEach(o *Extensions, do func(op Op, done func(Reply)), done func(Reply)) {
	each := make([]Reply, len(o.Each))
	var left atomic.Int32
	left.Store(int32(len(o.Each)))
	for i, e := range o.Each {
		do(e, func(rep Reply) {
			each[i] = rep
			if left.Add(-1) == 0 {
				done(joined(each))
			}
		})
	}
}

// split sends each extension of call c, which carries o, as its own call
// (see Extensions), and answers c once every one answered.
func (n *Redis) split(c *call, o *Extensions) {
	ctx, sendBy, done := c.ctx, c.sendBy, c.done
	*c = call{}
	callPool.Put(c)
	DoEach(o, func(e Op, done func(Reply)) { n.Do(ctx, sendBy, e, done) }, done)
}

// answerExtensions answers call c, which carries o, from its script's
// reply (with the node's time at), or sends what the reply cannot say
// again alone: every extension after an error reply, each extension whose
// GET failed.
func (n *Redis) answerExtensions(c *call, o *Extensions, at time.Time) {
	if err := c.cmds[0].Err(); isReply(err) && !errors.Is(err, ErrNil) {
		n.split(c, o)
		return
	}
	rep := o.Decode(c.cmds)
	each, _ := rep.Value.([]Reply)
	var again []int
	for i, r := range each {
		if errors.Is(r.Err, errGetFailed) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		c.finish(n.timed(o, rep, at))
		return
	}
	ctx, sendBy, done := c.ctx, c.sendBy, c.done
	*c = call{}
	callPool.Put(c)
	sub := &Extensions{Each: make([]*Extend, len(again))}
	for k, i := range again {
		sub.Each[k] = o.Each[i]
	}
	DoEach(sub, func(e Op, done func(Reply)) { n.Do(ctx, sendBy, e, done) }, func(r Reply) {
		alone, _ := r.Value.([]Reply)
		for k, i := range again {
			each[i] = alone[k]
		}
		done(n.timed(o, joined(each), at))
	})
}
