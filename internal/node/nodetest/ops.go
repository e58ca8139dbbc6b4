package nodetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/node"
)

// The operations, as the scripts answer them.

func (n *Fake) acquire(r *node.Acquire) node.Reply {
	var counter uint64
	var holder string
	recovering := false
	ok, err := n.apply("acquire", r.Key, func() bool {
		if r.MinUptime > 0 && time.Since(n.UpSince) < time.Duration(r.MinUptime)*time.Second {
			recovering = true
			return false
		}
		if r.FenceKey != "" {
			counter = n.Counters[r.FenceKey]
		}
		var granted bool
		granted, holder = n.grant(r)
		return granted
	})
	if recovering && err == nil {
		return node.Reply{Err: fmt.Errorf("%w: fake", node.ErrNodeRecovering)}
	}
	rep := node.Reply{OK: ok, Err: err}
	if holder != "" || counter != 0 {
		rep.Value = node.Grant{Holder: holder, Counter: counter}
	}
	return rep
}

// grant applies an acquisition to the key, as the acquire scripts do, and
// says whether it was granted, or else who holds the key when the script
// would say. Called with n.mu held.
func (n *Fake) grant(r *node.Acquire) (bool, string) {
	e, ok := n.Data[r.Key]
	switch {
	case !ok && r.Reenter:
		return false, "" // one more hold of a lock released meanwhile: never created
	case !ok:
		n.Data[r.Key] = Entry{Value: r.Token, Expires: time.Now().Add(r.TTL), Hash: r.Reentrant, Holds: 1}
		return true, ""
	case r.Reentrant && e.Hash && e.Value == r.Token:
		e.Holds++
		e.Expires = time.Now().Add(r.TTL)
		n.Data[r.Key] = e
		return true, ""
	case !r.Reentrant && !e.Hash && e.Value == r.Token:
		return true, "" // a retried SET NX GET that had been applied
	case !r.Reentrant && !e.Hash:
		return false, e.Value // SET NX GET names the holder
	}
	return false, ""
}

func (n *Fake) fence(r *node.Fence) (bool, error) {
	return n.apply("fence", r.Key, func() bool {
		n.Counters[r.FenceKey] = max(n.Counters[r.FenceKey], r.Fence)
		e, ok := n.Data[r.Key]
		return ok && e.Value == r.Token && e.Hash == r.Reentrant
	})
}

// release runs a release, applied twice when the fake resends, and says
// what its announcement returned (see announce).
func (n *Fake) release(r *node.Release) node.Reply {
	n.mu.Lock()
	resend := n.Resend
	n.mu.Unlock()
	if resend {
		_, _, _, _ = n.releaseHeard(r)
	}
	ok, v, gone, err := n.releaseHeard(r)
	rep := node.Reply{OK: ok, Err: err}
	switch {
	case gone:
		n.mu.Lock()
		server := n.identify()[0] // the release script says which server answered
		n.mu.Unlock()
		rep.Value = node.Released{Gone: true, Server: server}
	case v > 0:
		rep.Value = node.Released{Heard: v / 2, Named: v%2 == 1}
	}
	return rep
}

// releaseHeard runs a release, and says what its announcement returned
// (see announce).
func (n *Fake) releaseHeard(r *node.Release) (bool, int, bool, error) {
	heard, gone := 0, false
	ok, err := n.apply("release", r.Key, func() bool {
		e, ok := n.Data[r.Key]
		if !ok {
			gone = true
			return false
		}
		if e.Value != r.Token || e.Hash != r.Reentrant {
			return false
		}
		if r.Reentrant && r.Drop == node.DropUndo && e.Holds > 1 {
			e.Holds-- // an undo deletes the key with its last hold
			n.Data[r.Key] = e
			return true
		}
		if r.Reentrant && r.Drop == node.DropOne {
			e.Holds = max(1, e.Holds-1) // dropping one hold never frees the lock
			n.Data[r.Key] = e
			return true
		}
		delete(n.Data, r.Key)
		if r.Channel != "" {
			payload := r.Token
			if r.Reentrant {
				payload = r.Notice
			}
			heard = n.announce(r.Key, r.Channel, payload, n.popWaiter(n.queueKey(r.Key)))
		}
		return true
	})
	return ok, heard, gone && err == nil, err
}

func (n *Fake) extend(r *node.Extend) (bool, error) {
	return n.apply("extend", r.Key, func() bool {
		if e, ok := n.Data[r.Key]; ok && e.Value == r.Token && e.Hash == r.Reentrant {
			e.Expires = time.Now().Add(r.TTL)
			n.Data[r.Key] = e
			return true
		}
		return false
	})
}

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
// semaphore key and its live permits, soonest to expire first.
func (n *Fake) inspect(r *node.Inspect) node.Reply {
	var st node.KeyState
	_, err := n.apply("inspect", r.Key, func() bool {
		st.Counter = n.Counters[node.FenceKey(r.Key)]
		if e, ok := n.Data[r.Key]; ok {
			st.Held, st.Reentrant, st.TTL, st.Holder, st.Holds = true, e.Hash, time.Until(e.Expires), e.Value, max(e.Holds, 1)
		}
		if s := n.Sems[r.Key]; s != nil {
			st.Semaphore, st.Permits = true, s.Permits
			for tok, exp := range s.Holders {
				if ttl := time.Until(exp); ttl > 0 {
					st.Holders = append(st.Holders, node.Permit{Token: tok, TTL: ttl})
				}
			}
			slices.SortFunc(st.Holders, func(a, b node.Permit) int { return cmp.Compare(a.TTL, b.TTL) })
		}
		return false // changes nothing
	})
	if err != nil {
		return node.Reply{Err: err}
	}
	return node.Reply{OK: true, Value: st}
}

// forceRelease is force_release.lua: it deletes key whoever holds it and
// announces the release, leaving the fencing counter alone.
func (n *Fake) forceRelease(r *node.Force) node.Reply {
	var e Entry
	heard := 0
	ok, err := n.apply("force", r.Key, func() bool {
		var held bool
		if e, held = n.Data[r.Key]; !held {
			return false
		}
		delete(n.Data, r.Key)
		id := e.Value
		if e.Hash {
			id = r.Notice
		}
		heard = n.announce(r.Key, node.ReleaseChannel(r.Key), id, n.popWaiter(n.queueKey(r.Key)))
		return true
	})
	if err != nil || !ok {
		return node.Reply{Err: err}
	}
	return node.Reply{OK: true, Value: node.Forced{Holder: e.Value, Reentrant: e.Hash, Released: node.Released{Heard: heard / 2, Named: heard%2 == 1}}}
}

// announce is announce.lua. Called with n.mu held.
func (n *Fake) announce(key, channel, id, waiter string) int {
	if process, _, ok := strings.Cut(waiter, "/"); ok {
		return 2*n.publish(node.WakePrefix+process, id+"|"+waiter+"|"+key) + 1
	}
	return 2 * n.publish(channel, id+"|")
}

// popWaiter removes and returns the oldest waiter of queue key ("" when
// none). Called with n.mu held.
func (n *Fake) popWaiter(key string) string {
	best, score := "", int64(0)
	for m, s := range n.Queues[key] {
		if best == "" || s < score || s == score && m < best {
			best, score = m, s
		}
	}
	if best != "" {
		delete(n.Queues[key], best)
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
	heard := 0
	for _, s := range n.Subs {
		if s.Channels[channel] {
			heard++
			select {
			case s.ch <- &redis.Message{Channel: channel, Payload: payload}:
			default:
			}
		}
	}
	return heard
}

// Publish announces payload on channel, as another client would, and
// returns how many subscriptions heard it.
func (n *Fake) Publish(channel, payload string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.publish(channel, payload)
}

// Close implements node.Node.
func (n *Fake) Close() {}

// Subscribe implements node.Node.
func (n *Fake) Subscribe() node.Subscription {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := &Sub{n: n, Channels: map[string]bool{}, ch: make(chan *redis.Message, 64)}
	n.Subs = append(n.Subs, s)
	return s
}

// Sub is a subscription to a Fake; its state is guarded by the fake's
// lock (read it through Faults).
type Sub struct {
	n        *Fake
	Channels map[string]bool
	ch       chan *redis.Message
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
func (s *Sub) Messages() <-chan *redis.Message { return s.ch }

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
