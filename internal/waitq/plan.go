package waitq

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// plan is one sync pass of one node: the channels to subscribe and
// unsubscribe and the queue changes to send.
type plan struct {
	add, drop []string
	op        node.Op // nil: no queue change
}

func (p *plan) empty() bool { return len(p.add) == 0 && len(p.drop) == 0 && p.op == nil }

// plan works out what node i must be told and records it as told. Called
// with q.mu held.
func (q *Queue) plan(i int) *plan {
	ns := q.subs[i]
	p := &plan{}
	p.add, p.drop = q.channels(ns)
	if ns.refused {
		return p
	}
	if changes := q.changes(ns); len(changes) > 0 {
		p.op = &node.Queue{Changes: changes}
	}
	return p
}

// channels returns the channels ns must subscribe and unsubscribe, and
// records them as done. Called with q.mu held.
func (q *Queue) channels(ns *nodeSub) (add, drop []string) {
	if c := node.WakeChannel(q.self); !ns.have[c] {
		add = append(add, c)
	}
	for name := range q.names {
		if c := node.ReleaseChannel(name); !ns.have[c] {
			add = append(add, c)
		}
	}
	for c := range ns.have {
		if name, ok := strings.CutPrefix(c, node.ChannelPrefix); ok && q.names[name] == nil {
			drop = append(drop, c)
		}
	}
	// In order, as the changes below: a map's order would make each run
	// of the simulator (internal/sim) send them differently.
	slices.Sort(add)
	slices.Sort(drop)
	for _, c := range add {
		ns.have[c] = true
	}
	for _, c := range drop {
		delete(ns.have, c)
	}
	return add, drop
}

// changes returns the queue changes ns's node must get: the waiters that
// joined or must be queued again, and those that left. Called with q.mu
// held.
func (q *Queue) changes(ns *nodeSub) []node.QueueChange {
	var out []node.QueueChange
	current := map[string]bool{}
	for name, l := range q.names {
		for _, w := range l.list {
			current[w.id] = true
			if got := ns.queued[w.id]; got == nil || got.gen < w.gen {
				ns.queued[w.id] = &queued{name: name, gen: w.gen}
				out = append(out, node.QueueChange{Lock: name, Member: w.id, Score: w.since, TTL: queueTTL})
			}
		}
	}
	joined := len(out)
	for id, got := range ns.queued {
		if !current[id] {
			delete(ns.queued, id)
			if !got.popped {
				out = append(out, node.QueueChange{Lock: got.name, Member: id, Remove: true})
			}
		}
	}
	byMember := func(a, b node.QueueChange) int { return strings.Compare(a.Member, b.Member) }
	slices.SortFunc(out[:joined], byMember)
	slices.SortFunc(out[joined:], byMember)
	return out
}

// subscribe subscribes and unsubscribes s, bounded by timeout.
func (p *plan) subscribe(s node.Subscription, timeout time.Duration) {
	if len(p.add) == 0 && len(p.drop) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if len(p.add) > 0 {
		_ = s.Subscribe(ctx, p.add...)
	}
	if len(p.drop) > 0 {
		_ = s.Unsubscribe(ctx, p.drop...)
	}
}
