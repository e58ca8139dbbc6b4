package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
)

// The operator's view of a lock: what every node holds for a name
// (Redlock.Inspect), and a release whoever holds it (Redlock.ForceUnlock).
// Neither takes part in the algorithm: each sends one request to every node
// at once and reports every node's answer, not a quorum's.

// inspectReq reads key, its holder and time to live, and the name's
// fencing counter (fenceKey: key's name + a suffix, see inSlot), changing
// nothing. A node answers with reply.state.
type inspectReq struct {
	key, fenceKey string
}

// forceReq deletes key whoever holds it, and announces the release on
// channel to the next waiter of queueKey (see releaseReq); notice is the
// announcement's id when key holds a reentrant lock. It never touches the
// fencing counter. A node answers ok when it deleted a lock, with holder
// its token or owner id, and heard and named as a release's.
type forceReq struct {
	key, queueKey, channel, notice string
}

func (*inspectReq) name() string { return "inspect" }
func (*forceReq) name() string   { return "force release" }

// keyState is a node's answer to an inspectReq.
type keyState struct {
	held      bool
	reentrant bool
	ttl       time.Duration
	holder    string
	holds     int
	counter   uint64
}

// LockState is what the nodes held for one lock name when
// [Redlock.Inspect] read them. Each node is read at its own moment: the
// state may have changed by the time it is returned, and a lock held on a
// quorum here may have been released since (or taken, if free).
type LockState struct {
	// Name is the lock's name.
	Name string
	// Nodes has one entry per node, in the order of the clients given to
	// [New].
	Nodes []NodeLockState
	// Holder is the token (for a reentrant lock, the owner id) that holds
	// the lock on the most nodes; "" when no node holds it.
	Holder string
	// Held is how many nodes Holder holds the lock on.
	Held int
	// Quorum is how many nodes a holder needs: N/2+1.
	Quorum int
}

// Locked reports whether one holder held the lock on a quorum of nodes.
func (s *LockState) Locked() bool { return s.Held >= s.Quorum }

// Reachable returns how many nodes answered.
func (s *LockState) Reachable() int {
	n := 0
	for _, ns := range s.Nodes {
		if ns.Err == nil {
			n++
		}
	}
	return n
}

// NodeLockState is what one node held for a lock name (see [LockState]).
type NodeLockState struct {
	// Index is the node's position in the clients given to [New].
	Index int
	// Addr is the node's address as its client reports it.
	Addr string
	// Err is why the node could not be read, a [*NodeError]: the node did
	// not answer within the node timeout, could not be reached, is down
	// (see [Redlock.Health]), or holds something at the lock's name that is
	// not a lock ([ErrMisconfigured]). The fields below are then zero.
	Err error
	// Held is set when the node holds the lock.
	Held bool
	// TTL is how long the node was to keep the lock when it answered (its
	// PTTL); 0 when free.
	TTL time.Duration
	// Holder is the holder's token, or for a reentrant lock (see
	// [WithReentrant]) its owner id; "" when free. Tokens are secrets of
	// sorts: whoever knows one can release or extend that acquisition.
	Holder string
	// Reentrant is set when the lock is a reentrant one.
	Reentrant bool
	// Holds is the owner's hold count of a reentrant lock, 1 for a plain
	// lock, 0 when free.
	Holds int
	// Fence is the name's fencing counter on the node (see [WithFencing]),
	// 0 when it has none: the last fencing token recorded there, whether
	// or not the lock is held.
	Fence uint64
}

// Inspect reads what every node holds for the lock called name: whether it
// is held and by which token, for how long, and the name's fencing counter.
// It sends one read-only request to every node at once and returns once
// every node answered, the node timeout passed, or ctx ended. A node that
// failed has its error in [NodeLockState.Err]; a down node (see
// [Redlock.Health]) is not asked. It takes and changes nothing; it is the
// library's side of `redlock status`.
//
// It returns an error wrapping [ErrInvalidArgument] for a nil context or an
// empty name, [ErrClosed] after [Redlock.Close], and, when ctx ended before
// every node answered, the state read so far (the silent nodes with ctx's
// error) and an error wrapping ctx.Err().
func (r *Redlock) Inspect(ctx context.Context, name string) (*LockState, error) {
	if ctx == nil {
		return nil, invalid("nil context")
	}
	if name == "" {
		return nil, invalid("empty lock name")
	}
	replies, err := r.survey(ctx, &inspectReq{key: name, fenceKey: fenceKey(name)})
	if replies == nil {
		return nil, err
	}
	s := &LockState{Name: name, Nodes: make([]NodeLockState, len(replies)), Quorum: r.Quorum()}
	count := map[string]int{}
	for i, rep := range replies {
		ns := NodeLockState{Index: i, Addr: r.peers[i].n.addr()}
		switch {
		case rep.err != nil:
			ns.Err = &NodeError{Index: i, Addr: ns.Addr, Err: rep.err}
		case rep.state != nil && rep.state.held:
			st := rep.state
			ns.Held, ns.TTL, ns.Holder, ns.Reentrant, ns.Holds, ns.Fence = true, st.ttl, st.holder, st.reentrant, st.holds, st.counter
			count[st.holder]++
			if count[st.holder] > s.Held || count[st.holder] == s.Held && st.holder < s.Holder {
				s.Holder, s.Held = st.holder, count[st.holder]
			}
		case rep.state != nil:
			ns.Fence = rep.state.counter
		}
		s.Nodes[i] = ns
	}
	if err != nil {
		return s, fmt.Errorf("redlock: inspect %q: %w", name, err)
	}
	return s, nil
}

// ForcedRelease is one node's outcome of [Redlock.ForceUnlock].
type ForcedRelease struct {
	// Index is the node's position in the clients given to [New].
	Index int
	// Addr is the node's address as its client reports it.
	Addr string
	// Err is why the node could not be asked, a [*NodeError] (as in
	// [NodeLockState.Err]); the lock may then still be held there until its
	// TTL passes. The fields below are then zero.
	Err error
	// Deleted is set when the node held the lock and deleted it.
	Deleted bool
	// Holder is the token (for a reentrant lock, the owner id) of the lock
	// deleted; "" when the node did not hold it.
	Holder string
	// Reentrant is set when the lock deleted was a reentrant one.
	Reentrant bool
}

// ForceUnlock deletes the lock called name on every node that holds it,
// whoever holds it: the way out of a lock whose holder is stuck, or gone
// with a long TTL. Each node that deletes it announces the release, as
// [Mutex.Unlock] does, so that waiting Locks try at once. It never deletes
// or lowers the name's fencing counter: the next holder's token is still
// greater than the one the lock had. It does not refuse a key that holds
// something other than a lock: that node reports an error wrapping
// [ErrMisconfigured] and keeps the key.
//
// It sends one request to every node at once and returns once every node
// answered, the node timeout passed, or ctx ended, with one entry per node:
// a node that failed has its error in [ForcedRelease.Err] and may still
// hold the lock until its TTL passes; a down node (see [Redlock.Health]) is
// not asked. A request still in flight when it returns carries on in the
// background ([Redlock.Close] waits for it).
//
// The holder is not told: its [Mutex] notices at its next extension (or
// renewal), which finds the token gone and reports the lock lost. Until
// then it may still act as the holder; protect the resource with fencing
// tokens (see [WithFencing]) if that matters. Its [Mutex.Unlock], within
// the lock's validity, cannot tell a forced unlock from its own release
// resent by the client (a key gone on the server it was taken on), and
// returns nil.
//
// It returns an error wrapping [ErrInvalidArgument] for a nil context or an
// empty name, [ErrClosed] after [Redlock.Close], and, when ctx ended before
// every node answered, the outcomes so far and an error wrapping ctx.Err().
func (r *Redlock) ForceUnlock(ctx context.Context, name string) ([]ForcedRelease, error) {
	if ctx == nil {
		return nil, invalid("nil context")
	}
	if name == "" {
		return nil, invalid("empty lock name")
	}
	req := &forceReq{key: name, queueKey: queueKey(name), channel: releaseChannel(name), notice: uuid.NewString()}
	replies, err := r.survey(ctx, req)
	if replies == nil {
		return nil, err
	}
	out := make([]ForcedRelease, len(replies))
	for i, rep := range replies {
		fr := ForcedRelease{Index: i, Addr: r.peers[i].n.addr()}
		switch {
		case rep.err != nil:
			fr.Err = &NodeError{Index: i, Addr: fr.Addr, Err: rep.err}
		case rep.ok:
			fr.Deleted, fr.Holder = true, rep.holder
			fr.Reentrant = rep.state != nil && rep.state.reentrant
		}
		out[i] = fr
	}
	if err != nil {
		return out, fmt.Errorf("redlock: force unlock %q: %w", name, err)
	}
	return out, nil
}

// survey sends o to every node at once and returns every node's reply, in
// node order, once all answered or the node timeout passed: a node still
// silent then gets ErrNodeTimeout (and may be put down, as after any
// timeout). When ctx ends first, the silent nodes get ctx's error, which
// survey returns too. It returns no replies and ErrClosed after Close.
func (r *Redlock) survey(ctx context.Context, o op) ([]reply, error) {
	if err := r.track(1); err != nil {
		return nil, err
	}
	defer r.wg.Done()
	start := r.now()
	timeout := r.cfg.nodeTimeout
	votes := make(chan vote, len(r.peers)) // callbacks never block
	values := context.WithoutCancel(ctx)   // sent requests are bounded by the node timeout, not ctx
	for i, p := range r.peers {
		p.send(values, timeout, r.cfg.observer, o, func(rep reply) { votes <- vote{node: i, rep: rep} })
	}
	replies := make([]reply, len(r.peers))
	answered := make([]bool, len(r.peers))
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for left := len(r.peers); left > 0; left-- {
		select {
		case v := <-votes:
			replies[v.node], answered[v.node] = v.rep, true
		case <-timer.C:
			for i, p := range r.peers {
				if !answered[i] {
					p.timedOut(start)
					replies[i].err = p.timeoutErr(start)
				}
			}
			return replies, nil
		case <-ctx.Done():
			for i := range r.peers {
				if !answered[i] {
					replies[i].err = ctx.Err()
				}
			}
			return replies, ctx.Err()
		}
	}
	return replies, nil
}

// prepareInspect makes c run the inspect script for o (see redisNode.prepare).
func (n *redisNode) prepareInspect(c *call, o *inspectReq) {
	n.script(c, scripts.Inspect, n.besideName(o.key, o.fenceKey))
}

// prepareForce makes c run the forced release script for o.
func (n *redisNode) prepareForce(c *call, o *forceReq) {
	n.script(c, scripts.ForceRelease, n.besideName(o.key, o.queueKey), o.channel, o.notice)
}

// besideName is key followed by other, a key the name keeps beside it, as
// this node stores it; key alone when the node cannot keep other in the
// name's slot (see inSlot).
func (n *redisNode) besideName(key, other string) []string {
	if o := n.inSlot(key, other); o != "" {
		return []string{key, o}
	}
	return []string{key}
}

// parseOperator reads the reply to an inspectReq or a forceReq; ok is false
// for any other op (see redisNode.parse).
func parseOperator(c *call) (rep reply, ok bool) {
	switch c.op.(type) {
	case *inspectReq:
		return parseInspect(c.cmd), true
	case *forceReq:
		return parseForce(c.cmd), true
	}
	return reply{}, false
}

// parseInspect reads the inspect script's {kind, pttl, holder, holds, counter}.
func parseInspect(cmd redis.Cmder) reply {
	r, err := scriptSlice(cmd, 5)
	if err != nil {
		return reply{err: err}
	}
	kind, _ := r[0].(string)
	pttl, _ := r[1].(int64)
	holder, _ := r[2].(string)
	holds, _ := r[3].(int64)
	text, _ := r[4].(string)
	counter, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return reply{err: fmt.Errorf("redlock: fencing counter is not a number: %q", text)}
	}
	st := &keyState{counter: counter}
	if kind != "none" {
		st.held, st.reentrant, st.ttl, st.holder, st.holds = true, kind == "hash", time.Duration(pttl)*time.Millisecond, holder, int(holds)
	}
	return reply{ok: true, state: st}
}

// parseForce reads the forced release script's {status, holder, kind}.
func parseForce(cmd redis.Cmder) reply {
	r, err := scriptSlice(cmd, 3)
	if err != nil {
		return reply{err: err}
	}
	status, _ := r[0].(int64)
	holder, _ := r[1].(string)
	kind, _ := r[2].(string)
	if status == 0 {
		return reply{}
	}
	v := status - 1 // 2 × the clients the announcement reached, + 1 if it named a waiter
	return reply{ok: true, holder: holder, heard: int(v / 2), named: v%2 == 1, state: &keyState{reentrant: kind == "hash"}}
}

// scriptSlice returns a script's array reply of at least n elements.
func scriptSlice(cmd redis.Cmder, n int) ([]any, error) {
	if err := cmd.Err(); err != nil {
		return nil, err
	}
	sc, ok := cmd.(*redis.Cmd)
	if !ok {
		return nil, fmt.Errorf("redlock: unexpected command %T", cmd)
	}
	r, err := sc.Slice()
	if err != nil {
		return nil, err
	}
	if len(r) < n {
		return nil, errors.New("redlock: unexpected script reply")
	}
	return r, nil
}
