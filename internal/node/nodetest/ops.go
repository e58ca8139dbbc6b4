package nodetest

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// The operations, as the scripts answer them.

// queueKey is where the fake keeps name's queue of waiters, "" where its
// layout cannot (see node.Layout.Beside).
func (n *Fake) queueKey(name string) string {
	return node.Layout{Sharded: n.Sharded}.Beside(name, node.QueueKey(name))
}

func (n *Fake) queue(r *node.Queue) (bool, error) {
	return n.apply("queue", "", func() bool {
		for _, c := range r.Changes {
			key := n.queueKey(c.Lock)
			if key == "" {
				continue
			}
			q := n.Queues[key]
			if c.Remove {
				delete(q, c.Member)
				continue
			}
			if q == nil {
				q = map[string]int64{}
				n.Queues[key] = q
			}
			if _, ok := q[c.Member]; !ok {
				q[c.Member] = c.Score
			}
		}
		return true
	})
}

// inspect is inspect.lua: it reads key and the fencing counter, or the
// semaphore key and its live permits, or the readers, soonest to expire
// first (inspect.lua lists the readers in the hash's order).
func (n *Fake) inspect(r *node.Inspect) node.Reply {
	var st node.KeyState
	_, err := n.apply("inspect", r.Key, func() bool {
		st.Counter = n.Counters[node.FenceKey(r.Key)]
		if e, ok := n.Data[r.Key]; ok {
			st.Held, st.Reentrant, st.TTL, st.Holder, st.Holds = true, e.Hash, time.Until(e.Expires), e.Value, max(e.Holds, 1)
		}
		if s := n.liveSem(r.Key); s != nil {
			st.Semaphore, st.Permits, st.Holders = true, s.Permits, permits(s.Holders)
		}
		if rs := n.liveReaders(r.Key); rs != nil {
			st.Readers, st.Holders = true, permits(rs)
		}
		return false // changes nothing
	})
	if err != nil {
		return node.Reply{Err: err}
	}
	return node.Reply{OK: true, Value: st}
}

// permits lists holds, soonest to expire first.
func permits(holds map[string]time.Time) []node.Permit {
	var out []node.Permit
	for tok, exp := range holds {
		out = append(out, node.Permit{Token: tok, TTL: time.Until(exp)})
	}
	slices.SortFunc(out, func(a, b node.Permit) int { return cmp.Compare(a.TTL, b.TTL) })
	return out
}

// forceRelease is force_release.lua: it deletes key whoever holds it (a
// lock, a semaphore, the readers) and announces the release, leaving the
// fencing counter alone.
func (n *Fake) forceRelease(r *node.Release) node.Reply {
	var f node.Forced
	heard := 0
	ok, err := n.apply("force", r.Key, func() bool {
		id, held := "", false
		if f, id, held = n.forceDelete(r); held {
			heard = n.announce(r.Key, node.ReleaseChannel(r.Key), id, n.popWaiter(n.queueKey(r.Key)))
		}
		return held
	})
	if err != nil || !ok {
		return node.Reply{Err: err}
	}
	f.Released = node.Released{Heard: heard / 2, Named: heard%2 == 1}
	return node.Reply{OK: true, Value: f}
}

// forceDelete deletes what key holds, and says who held it and what the
// release is announced as: a plain lock's token, else r.Notice. A
// semaphore's holder is the permit that expires first (force_release.lua
// takes the lowest score); the readers' is the one the fake lists first
// (the script takes the hash's first). Called with n.mu held.
func (n *Fake) forceDelete(r *node.Release) (node.Forced, string, bool) {
	switch n.kind(r.Key) {
	case kindString:
		e := n.Data[r.Key]
		delete(n.Data, r.Key)
		return node.Forced{Holder: e.Value}, e.Value, true
	case kindHash:
		e := n.Data[r.Key]
		delete(n.Data, r.Key)
		return node.Forced{Holder: e.Value, Reentrant: true}, r.Notice, true
	case kindZset:
		holder := permits(n.Sems[r.Key].Holders)[0].Token
		delete(n.Sems, r.Key)
		return node.Forced{Holder: holder}, r.Notice, true
	case kindReaders:
		holder := permits(n.Readers[r.Key])[0].Token
		delete(n.Readers, r.Key)
		return node.Forced{Holder: holder}, r.Notice, true
	}
	return node.Forced{}, "", false
}

// announce is announce.lua. Called with n.mu held.
func (n *Fake) announce(key, channel, id, waiter string) int {
	if process, ok := node.MemberProcess(waiter); ok && node.Named(waiter) {
		return 2*n.publish(node.WakeChannel(process), node.Notice{ID: id, Member: waiter, Name: key}.String()) + 1
	}
	return 2 * n.publish(channel, node.Notice{ID: id}.String())
}

// popWaiter removes and returns the oldest waiter of queue key ("" when
// none). Called with n.mu held.
func (n *Fake) popWaiter(key string) string {
	best := n.headWaiter(key)
	if best != "" {
		delete(n.Queues[key], best)
	}
	return best
}

// headWaiter returns the oldest waiter of queue key ("" when none).
// Called with n.mu held.
func (n *Fake) headWaiter(key string) string {
	best, score := "", int64(0)
	for m, s := range n.Queues[key] {
		if best == "" || s < score || s == score && m < best {
			best, score = m, s
		}
	}
	return best
}

// publish delivers to the node's subscriptions and returns how many
// subscribed to channel. Called with n.mu held.
func (n *Fake) publish(channel, payload string) int {
	n.Published++
	if n.Mute {
		return 0 // announcements lost
	}
	if n.Lost {
		return n.subscribers(channel)
	}
	for _, s := range n.Subs {
		if s.Channels[channel] {
			select {
			case s.ch <- node.Message{Channel: channel, Payload: payload}:
			default:
			}
		}
	}
	return n.subscribers(channel)
}

// subscribers is PUBSUB NUMSUB channel: the subscriptions to channel that
// this server counts. Called with n.mu held.
func (n *Fake) subscribers(channel string) int {
	if n.Elsewhere || n.Mute {
		return 0
	}
	count := 0
	for _, s := range n.Subs {
		if s.Channels[channel] {
			count++
		}
	}
	return count
}

// Publish announces payload on channel, as another client would, and
// returns how many subscriptions heard it.
func (n *Fake) Publish(channel, payload string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.publish(channel, payload)
}

// Close implements node.Node: a fake runs nothing in the background.
func (n *Fake) Close(context.Context) error { return nil }

// Subscribe implements node.Node.
func (n *Fake) Subscribe() node.Subscription {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := &Sub{n: n, Channels: map[string]bool{}, ch: make(chan node.Message, 64)}
	n.Subs = append(n.Subs, s)
	return s
}

// Sub is a subscription to a Fake; its state is guarded by the fake's
// lock (read it through Faults).
type Sub struct {
	n        *Fake
	Channels map[string]bool
	ch       chan node.Message
	closed   bool
}

// Subscribe implements node.Subscription.
func (s *Sub) Subscribe(ctx context.Context, channels ...string) error {
	s.n.mu.Lock()
	hang := s.n.Hang
	s.n.mu.Unlock()
	if hang != nil { // a stalled node holds the caller until it answers
		select {
		case <-hang:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	for _, c := range channels {
		s.Channels[c] = true
	}
	return nil
}

// Unsubscribe implements node.Subscription.
func (s *Sub) Unsubscribe(_ context.Context, channels ...string) error {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	for _, c := range channels {
		delete(s.Channels, c)
	}
	return nil
}

// Messages implements node.Subscription.
func (s *Sub) Messages() <-chan node.Message { return s.ch }

// Close implements node.Subscription.
func (s *Sub) Close() error {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ch)
		s.n.Subs = slices.DeleteFunc(s.n.Subs, func(x *Sub) bool { return x == s })
	}
	return nil
}
