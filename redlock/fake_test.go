package redlock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// fakeNode is an in-memory node with injectable faults. Keys expire on the
// (virtual, under synctest) clock.
type fakeNode struct {
	name string

	mu      sync.Mutex
	data    map[string]fakeEntry
	delay   time.Duration            // before each call is applied
	err     error                    // every call fails with it, without effect
	lose    bool                     // calls take effect but the reply is lost
	hang    chan struct{}            // calls block until it is closed, then apply
	ctxHang bool                     // calls block until ctx ends, and fail with its error
	opDelay map[string]time.Duration // extra delay of one kind of call
	calls   map[string]int
	applied []string // ops applied, in order: "acquire token", ...
}

type fakeEntry struct {
	value   string
	expires time.Time
}

var errLostReply = errors.New("fake: reply lost")

func newFakeNode(name string) *fakeNode {
	return &fakeNode{name: name, data: map[string]fakeEntry{}, calls: map[string]int{}}
}

func (n *fakeNode) addr() string { return n.name }

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

func (n *fakeNode) count(op string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls[op]
}

// do runs one call with the node's faults around apply, which runs under
// n.mu with expired keys already purged.
func (n *fakeNode) do(ctx context.Context, op, key string, apply func() bool) (bool, error) {
	n.mu.Lock()
	n.calls[op]++
	delay, err, lose, hang, ctxHang := n.delay+n.opDelay[op], n.err, n.lose, n.hang, n.ctxHang
	n.mu.Unlock()
	if ctxHang {
		<-ctx.Done()
		return false, ctx.Err()
	}
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
	ok := apply()
	if ok {
		n.applied = append(n.applied, op)
	}
	n.mu.Unlock()
	if lose {
		return false, errLostReply
	}
	return ok, nil
}

func (n *fakeNode) acquire(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	return n.do(ctx, "acquire", key, func() bool {
		if _, ok := n.data[key]; ok {
			return false
		}
		n.data[key] = fakeEntry{value: token, expires: time.Now().Add(ttl)}
		return true
	})
}

func (n *fakeNode) release(ctx context.Context, key, token string) (bool, error) {
	return n.do(ctx, "release", key, func() bool {
		if e, ok := n.data[key]; ok && e.value == token {
			delete(n.data, key)
			return true
		}
		return false
	})
}

func (n *fakeNode) extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	return n.do(ctx, "extend", key, func() bool {
		if e, ok := n.data[key]; ok && e.value == token {
			n.data[key] = fakeEntry{value: token, expires: time.Now().Add(ttl)}
			return true
		}
		return false
	})
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
