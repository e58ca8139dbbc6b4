package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// fakeNode is an in-memory node with injectable faults. Keys expire on the
// (virtual, under synctest) clock.
type fakeNode struct {
	name string

	mu        sync.Mutex
	data      map[string]fakeEntry
	delay     time.Duration            // before each call is applied
	err       error                    // every call fails with it, without effect
	lose      bool                     // calls take effect but the reply is lost
	ids       []string                 // what identify answers; nil: the fake's name
	restarts  int                      // restart calls: each is another run id
	resend    bool                     // releases are applied twice, as a client retry after a lost reply does; the second reply comes back
	hang      chan struct{}            // calls block until it is closed, then apply
	opDelay   map[string]time.Duration // extra delay of one kind of call
	errOnly   string                   // when set, err applies to this kind of call only
	calls     map[string]int
	applied   []string // ops applied, in order: "acquire", "release", ...
	subs      []*fakeSub
	mute      bool                        // publish delivers nothing
	published int                         // releases announced
	counters  map[string]uint64           // fencing counters: no expiry
	queues    map[string]map[string]int64 // waiters' queues: member → score
	upSince   time.Time                   // the node's start, for restart delays
}

type fakeEntry struct {
	value   string // the token, or the owner of a reentrant (hash) lock
	expires time.Time
	hash    bool
	holds   int
}

var errLostReply = errors.New("fake: reply lost")

func newFakeNode(name string) *fakeNode {
	return &fakeNode{name: name, data: map[string]fakeEntry{}, calls: map[string]int{}, counters: map[string]uint64{},
		queues: map[string]map[string]int64{}, upSince: time.Now()}
}

// restart stands for a restart without persistence: every key and counter
// is gone, and the node's uptime starts again.
func (n *fakeNode) restart() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.data = map[string]fakeEntry{}
	n.counters = map[string]uint64{}
	n.upSince = time.Now()
	n.restarts++ // another server process: another run id
}

// counter returns the node's fencing counter for key.
func (n *fakeNode) counter(key string) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.counters[key]
}

func (n *fakeNode) addr() string { return n.name }

// identify names the servers behind the fake: ids when set, else its name.
func (n *fakeNode) identify(context.Context) ([]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ids != nil {
		return n.ids, nil
	}
	if n.restarts > 0 {
		return []string{fmt.Sprintf("%s-run%d", n.name, n.restarts)}, nil
	}
	return []string{n.name}, nil
}

// get returns key's value if it exists and has not expired.
func (n *fakeNode) get(key string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.data[key]
	if !ok || !time.Now().Before(e.expires) {
		return "", false
	}
	return e.value, true
}

func (n *fakeNode) set(key, value string, ttl time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.data[key] = fakeEntry{value: value, expires: time.Now().Add(ttl)}
}

func (n *fakeNode) ttl(key string) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return time.Until(n.data[key].expires)
}

func (n *fakeNode) publishedCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.published
}

// expiry returns when key expires on this node (zero if absent).
func (n *fakeNode) expiry(key string) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.data[key].expires
}

func (n *fakeNode) count(op string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls[op]
}

// do runs o on the fake's own goroutine, as a transport's worker would,
// and hands the reply to done: the path production takes.
func (n *fakeNode) do(ctx context.Context, _ time.Time, o op, done func(reply)) {
	go func() {
		var rep reply
		switch o := o.(type) {
		case *acquireReq:
			rep = n.acquire(ctx, o)
		case *fenceReq:
			rep.ok, rep.err = n.fence(ctx, o)
		case *releaseReq:
			var v int
			n.mu.Lock()
			resend := n.resend
			n.mu.Unlock()
			if resend {
				_, _, _, _ = n.releaseHeard(ctx, o)
			}
			rep.ok, v, rep.gone, rep.err = n.releaseHeard(ctx, o)
			rep.heard, rep.named = v/2, v%2 == 1
			if rep.gone {
				ids, _ := n.identify(ctx)
				rep.server = ids[0] // the release script says which server answered
			}
		case *extendReq:
			rep.ok, rep.err = n.extend(ctx, o)
		case *queueReq:
			rep.ok, rep.err = n.queue(ctx, o)
		case *inspectReq:
			rep = n.inspect(ctx, o)
		case *forceReq:
			rep = n.forceRelease(ctx, o)
		}
		done(rep)
	}()
}

// ping answers like any call, with the node's faults: an error a server
// would send comes back as such, as go-redis returns it.
func (n *fakeNode) ping(ctx context.Context) error {
	_, err := n.apply(ctx, "ping", "", func() bool { return true })
	return err
}

// apply runs one call with the node's faults around fn, which runs under
// n.mu with expired keys already purged.
func (n *fakeNode) apply(ctx context.Context, op, key string, fn func() bool) (bool, error) {
	n.mu.Lock()
	n.calls[op]++
	delay, err, lose, hang := n.delay+n.opDelay[op], n.err, n.lose, n.hang
	if n.errOnly != "" && n.errOnly != op {
		err = nil
	}
	n.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	if hang != nil {
		<-hang
	}
	if err != nil {
		return false, err
	}
	n.mu.Lock()
	if e, ok := n.data[key]; ok && !time.Now().Before(e.expires) {
		delete(n.data, key)
	}
	ok := fn()
	if ok && op != "ping" {
		n.applied = append(n.applied, op)
	}
	n.mu.Unlock()
	if lose {
		return false, errLostReply
	}
	return ok, nil
}

func (n *fakeNode) acquire(ctx context.Context, r *acquireReq) reply {
	var counter uint64
	var holder string
	recovering := false
	ok, err := n.apply(ctx, "acquire", r.key, func() bool {
		if r.minUptime > 0 && time.Since(n.upSince) < time.Duration(r.minUptime)*time.Second {
			recovering = true
			return false
		}
		if r.fenceKey != "" {
			counter = n.counters[r.fenceKey]
		}
		e, ok := n.data[r.key]
		switch {
		case !ok && r.reenter:
			return false // one more hold of a lock released meanwhile: never created
		case !ok:
			n.data[r.key] = fakeEntry{value: r.token, expires: time.Now().Add(r.ttl), hash: r.reentrant, holds: 1}
			return true
		case r.reentrant && e.hash && e.value == r.token:
			e.holds++
			e.expires = time.Now().Add(r.ttl)
			n.data[r.key] = e
			return true
		case !r.reentrant && !e.hash && e.value == r.token:
			return true // a retried SET NX GET that had been applied
		case !r.reentrant && !e.hash:
			holder = e.value // SET NX GET names the holder
		}
		return false
	})
	if recovering && err == nil {
		return reply{err: fmt.Errorf("%w: fake", ErrNodeRecovering)}
	}
	return reply{ok: ok, counter: counter, holder: holder, err: err}
}

func (n *fakeNode) fence(ctx context.Context, r *fenceReq) (bool, error) {
	return n.apply(ctx, "fence", r.key, func() bool {
		n.counters[r.fenceKey] = max(n.counters[r.fenceKey], r.fence)
		e, ok := n.data[r.key]
		return ok && e.value == r.token && e.hash == r.reentrant
	})
}

// releaseHeard runs a release, and says what its announcement returned
// (see announce).
func (n *fakeNode) releaseHeard(ctx context.Context, r *releaseReq) (bool, int, bool, error) {
	heard, gone := 0, false
	ok, err := n.apply(ctx, "release", r.key, func() bool {
		e, ok := n.data[r.key]
		if !ok {
			gone = true
			return false
		}
		if e.value != r.token || e.hash != r.reentrant {
			return false
		}
		if r.reentrant && r.drop == dropUndo && e.holds > 1 {
			e.holds-- // an undo deletes the key with its last hold
			n.data[r.key] = e
			return true
		}
		if r.reentrant && r.drop == dropOne {
			e.holds = max(1, e.holds-1) // dropping one hold never frees the lock
			n.data[r.key] = e
			return true
		}
		{
			delete(n.data, r.key)
			if r.channel != "" {
				payload := r.token
				if r.reentrant {
					payload = r.notice
				}
				heard = n.announce(r.key, r.channel, payload, n.popWaiter(r.queueKey))
			}
		}
		return true
	})
	return ok, heard, gone && err == nil, err
}

func (n *fakeNode) extend(ctx context.Context, r *extendReq) (bool, error) {
	return n.apply(ctx, "extend", r.key, func() bool {
		if e, ok := n.data[r.key]; ok && e.value == r.token && e.hash == r.reentrant {
			e.expires = time.Now().Add(r.ttl)
			n.data[r.key] = e
			return true
		}
		return false
	})
}

func (n *fakeNode) queue(ctx context.Context, r *queueReq) (bool, error) {
	return n.apply(ctx, "queue", r.key, func() bool {
		q := n.queues[r.key]
		if r.ttl > 0 {
			return true // the fake's queues do not expire
		}
		if r.remove {
			delete(q, r.member)
			return true
		}
		if q == nil {
			q = map[string]int64{}
			n.queues[r.key] = q
		}
		if _, ok := q[r.member]; !ok {
			q[r.member] = r.score
		}
		return true
	})
}

// inspect is inspect.lua: it reads key and the fencing counter.
func (n *fakeNode) inspect(ctx context.Context, r *inspectReq) reply {
	st := &keyState{}
	_, err := n.apply(ctx, "inspect", r.key, func() bool {
		st.counter = n.counters[r.fenceKey]
		if e, ok := n.data[r.key]; ok {
			st.held, st.reentrant, st.ttl, st.holder, st.holds = true, e.hash, time.Until(e.expires), e.value, max(e.holds, 1)
		}
		return false // changes nothing
	})
	if err != nil {
		return reply{err: err}
	}
	return reply{ok: true, state: st}
}

// forceRelease is force_release.lua: it deletes key whoever holds it and
// announces the release, leaving the fencing counter alone.
func (n *fakeNode) forceRelease(ctx context.Context, r *forceReq) reply {
	var e fakeEntry
	heard := 0
	ok, err := n.apply(ctx, "force", r.key, func() bool {
		var held bool
		if e, held = n.data[r.key]; !held {
			return false
		}
		delete(n.data, r.key)
		id := e.value
		if e.hash {
			id = r.notice
		}
		heard = n.announce(r.key, r.channel, id, n.popWaiter(r.queueKey))
		return true
	})
	if err != nil || !ok {
		return reply{err: err}
	}
	return reply{ok: true, holder: e.value, heard: heard / 2, named: heard%2 == 1, state: &keyState{reentrant: e.hash}}
}

// announce is announce.lua. Called with n.mu held.
func (n *fakeNode) announce(key, channel, id, waiter string) int {
	if process, _, ok := strings.Cut(waiter, "/"); ok {
		return 2*n.publish(wakePrefix+process, id+"|"+waiter+"|"+key) + 1
	}
	return 2 * n.publish(channel, id+"|")
}

// popWaiter removes and returns the oldest waiter of queue key ("" when
// none). Called with n.mu held.
func (n *fakeNode) popWaiter(key string) string {
	best, score := "", int64(0)
	for m, s := range n.queues[key] {
		if best == "" || s < score || s == score && m < best {
			best, score = m, s
		}
	}
	if best != "" {
		delete(n.queues[key], best)
	}
	return best
}

// waiting returns the members of queue key.
func (n *fakeNode) waiting(key string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for m := range n.queues[key] {
		out = append(out, m)
	}
	return out
}

// publish delivers to the node's subscriptions and returns how many
// subscribed to channel. Called with n.mu held.
func (n *fakeNode) publish(channel, payload string) int {
	n.published++
	if n.mute {
		return 0 // announcements lost
	}
	heard := 0
	for _, s := range n.subs {
		if s.channels[channel] {
			heard++
			select {
			case s.ch <- &redis.Message{Channel: channel, Payload: payload}:
			default:
			}
		}
	}
	return heard
}

func (n *fakeNode) close() {}

func (n *fakeNode) subscribe() subscription {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := &fakeSub{n: n, channels: map[string]bool{}, ch: make(chan *redis.Message, 64)}
	n.subs = append(n.subs, s)
	return s
}

// fakeSub is a subscription to a fakeNode; its state is guarded by n.mu.
type fakeSub struct {
	n        *fakeNode
	channels map[string]bool
	ch       chan *redis.Message
	closed   bool
}

func (s *fakeSub) subscribe(ctx context.Context, channels ...string) error {
	s.n.mu.Lock()
	hang := s.n.hang
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
		s.channels[c] = true
	}
	return nil
}

func (s *fakeSub) unsubscribe(_ context.Context, channels ...string) error {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	for _, c := range channels {
		delete(s.channels, c)
	}
	return nil
}

func (s *fakeSub) messages() <-chan *redis.Message { return s.ch }

func (s *fakeSub) close() error {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ch)
		s.n.subs = slices.DeleteFunc(s.n.subs, func(x *fakeSub) bool { return x == s })
	}
	return nil
}

// fakes returns n fresh fake nodes, as fakes and as nodes.
func fakes(n int) ([]*fakeNode, []node) {
	fs := make([]*fakeNode, n)
	ns := make([]node, n)
	for i := range fs {
		fs[i] = newFakeNode("fake" + string(rune('0'+i)))
		ns[i] = fs[i]
	}
	return fs, ns
}

// faults changes the node's faults under its lock: calls may be in flight.
func (n *fakeNode) faults(change func(n *fakeNode)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	change(n)
}

// tokenOf returns the token of m's current acquisition, "" when none.
func tokenOf(m *Mutex) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil {
		return ""
	}
	return m.lease.token
}

// fakeNodes returns the fakes as nodes: several Redlocks, as several
// processes would, can share them.
func fakeNodes(fs []*fakeNode) []node {
	ns := make([]node, len(fs))
	for i, f := range fs {
		ns[i] = f
	}
	return ns
}
