package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// Together is side s with each plain extension sent as the middle one of
// three in one request (node.Extensions: renewal's extensions of many
// locks), the other two of names nothing holds: the cases check that way
// of speaking against the same answers as every other.
func Together(s *Side) *Side {
	c := *s
	c.Name += ", extensions together"
	c.Node = inThrees{s.Node}
	return &c
}

// inThrees is a node whose plain extensions go out three in a request.
type inThrees struct{ node.Node }

// Do implements node.Node. The extensions around op must be refused: a
// neighbour's answer spilling into op's would show there, or in op's.
func (t inThrees) Do(ctx context.Context, sendBy time.Time, op node.Op, done func(node.Reply)) {
	ext, ok := op.(*node.Extend)
	if !ok || !node.Together(ext) {
		t.Node.Do(ctx, sendBy, op, done)
		return
	}
	before := &node.Extend{Key: ext.Key + ":before", Token: ext.Token, TTL: ext.TTL}
	after := &node.Extend{Key: ext.Key + ":after", Token: ext.Token, TTL: ext.TTL}
	t.Node.Do(ctx, sendBy, &node.Extensions{Each: []*node.Extend{before, ext, after}}, func(rep node.Reply) {
		if rep.Err != nil {
			done(node.Reply{Err: rep.Err})
			return
		}
		each, _ := rep.Value.([]node.Reply)
		if len(each) != 3 {
			done(node.Reply{Err: fmt.Errorf("conformance: extensions together answered %d replies for 3", len(each))})
			return
		}
		for _, r := range []node.Reply{each[0], each[2]} {
			if r.OK || r.Err != nil {
				done(node.Reply{Err: fmt.Errorf("conformance: an extension of a name nothing holds, sent beside %s, answered %+v", ext.Key, r)})
				return
			}
		}
		if each[1].Time.IsZero() {
			each[1].Time = rep.Time // a vote's time is the request's
		}
		done(each[1])
	})
}
