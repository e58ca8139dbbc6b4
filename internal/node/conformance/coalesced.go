package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// Coalesced is side s, a node spoken to with scripts, with each plain
// extension sent in one round trip between two others, of names nothing
// holds: the node's worker sends the three as one extend_many.lua (see
// internal/node's Coalescing), and the cases check that way of speaking
// against the same answers as every other.
func Coalesced(s *Side) *Side {
	c := *s
	c.Name += ", extensions coalesced"
	c.Node = together{s.Node.(*node.Redis)}
	return &c
}

// together is a node whose plain extensions go out coalesced.
type together struct{ *node.Redis }

// Do implements node.Node. The extensions around op must be refused: a
// neighbour's answer spilling into op's would show there, or in op's. And
// the run's own reply must have answered them: once the node holds its
// scripts, none goes again alone (the answers alone would be the same,
// and would hide a run that never works).
func (t together) Do(ctx context.Context, sendBy time.Time, op node.Op, done func(node.Reply)) {
	ext, ok := op.(*node.Extend)
	if !ok || ext.Shape != node.Plain || ext.Ack.Replicas > 0 {
		t.Redis.Do(ctx, sendBy, op, done)
		return
	}
	call(t.Redis, node.Clock{}) // the node starts, and loads its scripts, at its first call
	for end := time.Now().Add(5 * time.Second); !t.ScriptsCached(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			done(node.Reply{Err: errors.New("conformance: the node never held its scripts")})
			return
		}
	}
	before := &node.Extend{Key: ext.Key + ":before", Token: ext.Token, TTL: ext.TTL}
	after := &node.Extend{Key: ext.Key + ":after", Token: ext.Token, TTL: ext.TTL}
	alone := t.SentAlone()
	reps := t.DoTogether(ctx, before, op, after)
	if n := t.SentAlone() - alone; n > 0 {
		done(node.Reply{Err: fmt.Errorf("conformance: %d extensions of a run beside %s went again alone", n, ext.Key)})
		return
	}
	for _, r := range []node.Reply{reps[0], reps[2]} {
		if r.OK || r.Err != nil {
			done(node.Reply{Err: fmt.Errorf("conformance: an extension of a name nothing holds, sent beside %s, answered %+v", ext.Key, r)})
			return
		}
	}
	done(reps[1])
}
