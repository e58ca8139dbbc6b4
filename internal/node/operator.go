package node

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/scripts"
)

// The operations outside a lock's life: reading a lock for an operator
// (its forced release is a Release of Shape Any), the waiters' queues, and
// who a node is.

// Inspect reads Key, its holder and time to live, and the name's fencing
// counter, changing nothing; or, when Key is a semaphore, its permit count
// and live permits. Its Value is a KeyState.
type Inspect struct {
	Key string
}

// KeyState is a node's answer to an Inspect. A lock sets Held and the
// fields after it; a semaphore sets Semaphore, Permits and Holders; Counter
// is read in both cases.
type KeyState struct {
	Held      bool
	Reentrant bool
	TTL       time.Duration
	Holder    string
	Holds     int
	Counter   uint64
	Semaphore bool
	Permits   int
	Holders   []Permit
	// Readers is set for a reader-writer lock's readers, who are in
	// Holders.
	Readers bool
}

// Permit is one live permit of a semaphore on a node: its holder's token
// and the time it has left by the node's clock.
type Permit struct {
	Token string
	TTL   time.Duration
}

// Name implements Op.
func (*Inspect) Name() string { return "inspect" }

// Lane implements Laned: the lock's name.
func (o *Inspect) Lane() string { return o.Key }

// Encode implements Op. The fencing counter and the permit count are kept
// beside the name on the same terms (see Layout.Beside): both or neither.
func (o *Inspect) Encode(l Layout, cmds []Cmd) []Cmd {
	keys := l.keys(o.Key, FenceKey(o.Key))
	if len(keys) > 1 {
		keys = append(keys, l.Beside(o.Key, PermitsKey(o.Key)))
	}
	return append(cmds, script(scripts.Inspect, keys))
}

// Decode implements Op: inspect.lua's {kind, pttl, holder, holds, counter},
// then for a semaphore {permits, token, ttl, ...}.
func (*Inspect) Decode(cmds []Cmd) Reply {
	r, err := slice(&cmds[0], 5)
	if err != nil {
		return Reply{Err: err}
	}
	kind, _ := r[0].(string)
	pttl, _ := r[1].(int64)
	holder, _ := r[2].(string)
	holds, _ := r[3].(int64)
	text, _ := r[4].(string)
	counter, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return Reply{Err: fmt.Errorf("redlock: fencing counter is not a number: %q", text)}
	}
	st := KeyState{Counter: counter}
	switch kind {
	case "none":
	case "zset", "readers":
		if err := decodePermits(&st, r[5:]); err != nil {
			return Reply{Err: err}
		}
		st.Semaphore, st.Readers = kind == "zset", kind == "readers"
	default:
		st.Held, st.Reentrant, st.TTL, st.Holder, st.Holds = true, kind == "hash", time.Duration(pttl)*time.Millisecond, holder, int(holds)
	}
	return Reply{OK: true, Value: st}
}

// decodePermits reads a semaphore's (or the readers') part of inspect.lua's
// reply: the permit count, then a token and its remaining ms per live
// permit (per live reader).
func decodePermits(st *KeyState, r []any) error {
	if len(r)%2 != 1 {
		return fmt.Errorf("redlock: unexpected semaphore inspect reply %v", r)
	}
	permits, err := number(r[0])
	if err != nil {
		return fmt.Errorf("redlock: permit count is not a number: %v", r[0])
	}
	st.Permits = int(permits)
	for i := 1; i < len(r); i += 2 {
		token, _ := r[i].(string)
		ms, err := number(r[i+1])
		if err != nil {
			return fmt.Errorf("redlock: permit time to live is not a number: %v", r[i+1])
		}
		st.Holders = append(st.Holders, Permit{Token: token, TTL: time.Duration(ms) * time.Millisecond})
	}
	return nil
}

// decodeForced reads force_release.lua's {status, holder, kind}, the reply
// of a Release of Shape Any.
func decodeForced(cmds []Cmd) Reply {
	r, err := slice(&cmds[0], 3)
	if err != nil {
		return Reply{Err: err}
	}
	status, _ := r[0].(int64)
	if status == 0 {
		return Reply{} // nothing held the name
	}
	holder, _ := r[1].(string)
	kind, _ := r[2].(string)
	v := status - 1 // 2 × the clients the announcement reached, + 1 if it named a waiter
	return Reply{OK: true, Value: Forced{Holder: holder, Reentrant: kind == "hash", Released: Released{Heard: int(v / 2), Named: v%2 == 1}}}
}

// Queue brings a node's queues of waiters up to date: each change is one
// plain command (a script each would cost the node ten times as much). A
// node answers OK once all are applied; Err is the first failure.
type Queue struct {
	Changes []QueueChange
}

// QueueChange adds Member to the queue of lock Lock with Score (ZADD NX:
// a waiter queued again keeps its place) and sets the queue's time to live
// to TTL, so that a queue nobody waits on goes away; or, with Remove, takes
// Member out.
type QueueChange struct {
	Lock, Member string
	Score        int64 // when the waiter started waiting, in Unix milliseconds
	TTL          time.Duration
	Remove       bool
}

// Name implements Op.
func (*Queue) Name() string { return "queue" }

// Encode implements Op. A node that cannot keep a name's queue in the
// name's slot (see Layout.Beside) does not queue its waiters: its releases
// wake them all.
func (o *Queue) Encode(l Layout, cmds []Cmd) []Cmd {
	for _, c := range o.Changes {
		key := l.Beside(c.Lock, QueueKey(c.Lock))
		switch {
		case key == "":
		case c.Remove:
			cmds = append(cmds, Cmd{Args: []any{"zrem", key, c.Member}, Expect: ExpectInt})
		default:
			cmds = append(cmds, Cmd{Args: []any{"zadd", key, "nx", c.Score, c.Member}, Expect: ExpectInt},
				Cmd{Args: []any{"pexpire", key, c.TTL.Milliseconds()}, Expect: ExpectInt})
		}
	}
	return cmds
}

// Decode implements Op.
func (*Queue) Decode(cmds []Cmd) Reply {
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return Reply{Err: err}
		}
	}
	return Reply{OK: true}
}

// Identify asks the servers behind a node who they are: the run id of each
// (one server, or each master of a cluster or ring), which is unique to a
// server process. Its Value is the run ids, a []string.
type Identify struct{}

// Name implements Op.
func (Identify) Name() string { return "identify" }

// Encode implements Op: INFO server, for a node of one server.
func (Identify) Encode(_ Layout, cmds []Cmd) []Cmd {
	return append(cmds, Cmd{Args: []any{"info", "server"}, Expect: ExpectText})
}

// Decode implements Op.
func (Identify) Decode(cmds []Cmd) Reply {
	id, err := runID(cmds[0].Text())
	if err != nil {
		return Reply{Err: err}
	}
	return Reply{OK: true, Value: []string{id}}
}

// Run implements Runner: INFO on every server behind the node.
func (Identify) Run(ctx context.Context, t Transport) Reply {
	var (
		mu  sync.Mutex
		ids []string
	)
	err := t.Each(ctx, false, func(c Conn) error {
		info := NewText("info", "server")
		c.Send(ctx, info)
		id, err := runID(info.Text())
		if err != nil {
			return err
		}
		mu.Lock()
		ids = append(ids, id)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return Reply{Err: err}
	}
	return Reply{OK: true, Value: ids}
}

// runID reads run_id from an INFO reply.
func runID(info string, err error) (string, error) {
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok && v != "" {
			return v, nil
		}
	}
	return "", fmt.Errorf("redlock: no run_id in INFO server")
}
