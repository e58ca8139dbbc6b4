package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
)

// Per-node I/O through go-redis. This file is the only one that talks to a
// Redis node: the algorithm sees each node as a [node], one request and one
// callback per step.
//
// redisNode batches: a few worker goroutines per node each take the oldest
// waiting request plus every other one queued meanwhile and send them as
// one pipeline, one round trip. A lone caller's request leaves at once,
// alone; under load, requests that arrive while a round trip is in flight
// share the next one, which is where most of the cost of a lock lies
// (system calls and server wake-ups per round trip, not bytes). The queue is
// bounded: a request that finds it full fails at once, unsent, so that a
// stalled node costs neither goroutines nor memory.
type redisNode struct {
	client  redis.UniversalClient
	address string
	// oldSet is set once the node refused SET ... NX GET (Redis before
	// 7.0): acquisitions then send plain SET NX, which cannot say who holds
	// the key, nor tell a SET resent by the client from another holder's.
	oldSet atomic.Bool

	start   sync.Once
	stopped sync.Once
	queue   chan *call
	stop    chan struct{}
	wg      sync.WaitGroup
}

// Batching limits. workers bounds the round trips in flight per node (and
// the connections the queue holds); maxBatch bounds one pipeline; queueLen
// bounds the requests waiting for a worker.
const (
	workers  = 4
	maxBatch = 128
	queueLen = 4 * maxBatch
)

// call is one request waiting for its round trip.
type call struct {
	ctx    context.Context //nolint:containedctx // a request in flight: its values travel with it
	sendBy time.Time
	op     op
	cmd    redis.Cmder
	script *redis.Script // set for EVALSHA, to fall back to EVAL on NOSCRIPT
	keys   []string
	args   []any
	done   func(reply)
}

var callPool = sync.Pool{New: func() any { return new(call) }}

// errUnsent is the error of a request that was never sent, so cannot have
// taken effect: its node timeout passed while it waited in the queue, the
// queue was full, or the node was closed.
var errUnsent = errors.New("redlock: request not sent")

// errQueueFull and errClosedNode are errUnsent for a request that found
// the queue full, or the node closed.
var (
	errQueueFull  = fmt.Errorf("%w: the node's queue is full", errUnsent)
	errClosedNode = fmt.Errorf("%w: the node is closed", errUnsent)
)

func newRedisNode(c redis.UniversalClient) *redisNode {
	return &redisNode{
		client: c, address: clientAddr(c),
		queue: make(chan *call, queueLen), stop: make(chan struct{}),
	}
}

func (n *redisNode) addr() string { return n.address }

func (n *redisNode) do(ctx context.Context, sendBy time.Time, o op, done func(reply)) {
	n.start.Do(n.run)
	c := callPool.Get().(*call)
	c.ctx, c.sendBy, c.op, c.done = ctx, sendBy, o, done
	n.prepare(c)
	select {
	case <-n.stop:
		c.finish(reply{err: errClosedNode})
		return
	default:
	}
	select {
	case n.queue <- c:
	default:
		c.finish(reply{err: errQueueFull})
	}
}

// ping sends PING on its own connection, beside the queue: the workers may
// all be stuck on a silent node.
func (n *redisNode) ping(ctx context.Context) error {
	return n.client.Ping(ctx).Err()
}

// run starts the workers, and loads the scripts into the node's cache so
// that EVALSHA in a pipeline finds them (a node that is down or restarts
// answers NOSCRIPT, and send falls back to EVAL, which loads them).
func (n *redisNode) run() {
	n.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		// Close must not wait out a silent node's timeout. The watcher
		// ends with the load (cancel) or the node's stop, and close waits.
		n.wg.Go(func() {
			select {
			case <-n.stop:
				cancel()
			case <-ctx.Done():
			}
		})
		for _, s := range scripts.All {
			if s.Load(ctx, n.client).Err() != nil {
				return
			}
		}
	})
	for range workers {
		n.wg.Go(n.work)
	}
}

func (n *redisNode) work() {
	batch := make([]*call, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case c := <-n.queue:
			batch = append(batch, c)
		case <-n.stop:
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case c := <-n.queue:
				batch = append(batch, c)
			default:
				break more
			}
		}
		n.send(batch)
	}
}

// send makes one round trip for batch and hands each call its reply. Calls
// whose sendBy has passed are answered errUnsent without being sent.
func (n *redisNode) send(batch []*call) {
	now := time.Now()
	live := batch[:0]
	for _, c := range batch {
		if now.After(c.sendBy) {
			c.finish(reply{err: fmt.Errorf("%w: the node timeout passed in the queue", errUnsent)})
			continue
		}
		live = append(live, c)
	}
	batch = live
	if len(batch) == 0 {
		return
	}
	// No deadline: the client's own timeouts bound the round trip. A
	// context deadline would make go-redis close the connection when it
	// passes (with ContextTimeoutEnabled), and re-dial for the next call:
	// to a far node, on nearly every call.
	ctx := batch[0].ctx
	if len(batch) == 1 {
		_ = n.client.Process(ctx, batch[0].cmd)
	} else {
		pipe := n.client.Pipeline()
		for _, c := range batch {
			_ = pipe.Process(ctx, c.cmd)
		}
		_, _ = pipe.Exec(ctx) // each command keeps its own error
	}
	for _, c := range batch {
		if c.script != nil && c.cmd.Err() != nil && redis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") {
			// The node lost its script cache (a restart): EVAL loads it.
			c.cmd = c.script.Run(ctx, n.client, c.keys, c.args...)
		}
		if a, ok := c.op.(*acquireReq); ok && !n.oldSet.Load() && isOldSetError(c.cmd.Err()) && c.script == nil {
			// Redis before 7.0 refuses NX with GET, applying nothing.
			n.oldSet.Store(true)
			c.cmd = n.client.SetNX(ctx, a.key, a.token, a.ttl)
		}
	}
	for _, c := range batch {
		c.finish(n.parse(c))
	}
}

// isOldSetError reports the syntax error of SET ... NX GET before Redis 7.0.
func isOldSetError(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "ERR syntax error")
}

// finish hands c's reply to its callback and recycles c.
func (c *call) finish(rep reply) {
	done := c.done
	*c = call{}
	callPool.Put(c)
	done(rep)
}

// close stops the workers, then answers every call still queued errUnsent.
// It is called once no operation is running.
func (n *redisNode) close() {
	n.stopped.Do(func() { close(n.stop) })
	n.wg.Wait()
	for {
		select {
		case c := <-n.queue:
			c.finish(reply{err: errClosedNode})
		default:
			return
		}
	}
}

// prepare builds c's command from its op.
func (n *redisNode) prepare(c *call) {
	switch o := c.op.(type) {
	case *acquireReq:
		switch {
		case o.reentrant:
			again := "0"
			if o.reenter {
				again = "1"
			}
			n.script(c, scripts.AcquireReentrant, keysOf(o.key, o.fenceKey), o.token, o.ttl.Milliseconds(), again, o.minUptime)
		case o.fenceKey != "" || o.minUptime > 0:
			n.script(c, scripts.Acquire, keysOf(o.key, o.fenceKey), o.token, o.ttl.Milliseconds(), o.minUptime)
		case n.oldSet.Load():
			c.cmd = redis.NewBoolCmd(c.ctx, "set", o.key, o.token, "px", o.ttl.Milliseconds(), "nx")
		default:
			// SET key token NX GET PX ttl (Redis 7.0 or later): GET makes
			// the answer tell "absent, now set" (nil) from "already holds
			// this value" (a command the client resent after a network
			// error, whose first try was applied) and from "held by
			// another value", which names the competitor.
			c.cmd = redis.NewStringCmd(c.ctx, "set", o.key, o.token, "nx", "get", "px", o.ttl.Milliseconds())
		}
	case *fenceReq:
		reentrant := "0"
		if o.reentrant {
			reentrant = "1"
		}
		n.script(c, scripts.Fence, []string{o.key, o.fenceKey}, o.token, o.fence, reentrant)
	case *releaseReq:
		keys := []string{o.key}
		if o.channel != "" && o.queueKey != "" {
			keys = append(keys, o.queueKey)
		}
		if o.reentrant {
			n.script(c, scripts.ReleaseReentrant, keys, o.token, strconv.Itoa(int(o.drop)), o.channel, o.notice)
			return
		}
		n.script(c, scripts.Release, keys, o.token, o.channel)
	case *queueReq:
		// Plain commands: several per acquisition, a script each would
		// cost the node ten times as much.
		switch {
		case o.remove:
			c.cmd = redis.NewIntCmd(c.ctx, "zrem", o.key, o.member)
		case o.ttl > 0:
			c.cmd = redis.NewIntCmd(c.ctx, "pexpire", o.key, o.ttl.Milliseconds())
		default:
			c.cmd = redis.NewIntCmd(c.ctx, "zadd", o.key, "nx", o.score, o.member)
		}
	case *extendReq:
		s := scripts.Extend
		if o.reentrant {
			s = scripts.ExtendReentrant
		}
		n.script(c, s, []string{o.key}, o.token, o.ttl.Milliseconds())
	}
}

// keysOf is key, followed by fenceKey when it is set.
func keysOf(key, fenceKey string) []string {
	if fenceKey == "" {
		return []string{key}
	}
	return []string{key, fenceKey}
}

// script makes c run s with keys and args through EVALSHA.
func (n *redisNode) script(c *call, s *redis.Script, keys []string, args ...any) {
	c.script, c.keys, c.args = s, keys, args
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, "evalsha", s.Hash(), len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmdArgs = append(cmdArgs, args...)
	c.cmd = redis.NewCmd(c.ctx, cmdArgs...)
}

// parse reads c's reply as its op's answer.
func (n *redisNode) parse(c *call) reply {
	err := c.cmd.Err()
	switch o := c.op.(type) {
	case *acquireReq:
		if c.script != nil {
			if err != nil {
				return reply{err: err}
			}
			return parseAcquireScript(c.cmd.(*redis.Cmd), o)
		}
		switch cmd := c.cmd.(type) {
		case *redis.BoolCmd: // plain SET NX: true when set
			if errors.Is(err, redis.Nil) {
				return reply{}
			}
			return reply{ok: err == nil && cmd.Val(), err: err}
		case *redis.StringCmd:
			switch {
			case errors.Is(err, redis.Nil):
				return reply{ok: true} // the key was absent: set to token
			case err != nil && redis.HasErrorPrefix(err, "WRONGTYPE"):
				return reply{} // GET met a key of another type (a reentrant lock): held
			case err != nil:
				return reply{err: err}
			}
			if v := cmd.Val(); v != o.token {
				return reply{holder: v}
			}
			return reply{ok: true} // held by this token: a resent SET of ours
		}
	}
	if err != nil {
		return reply{err: err}
	}
	if _, ok := c.op.(*queueReq); ok {
		return reply{ok: true}
	}
	v, err := c.cmd.(*redis.Cmd).Int64()
	if _, ok := c.op.(*releaseReq); ok && v > 1 {
		// 1 + 2 × the clients the announcement reached, + 1 if it named a waiter
		return reply{ok: true, heard: int(v-1) / 2, named: (v-1)%2 == 1, err: err}
	}
	return reply{ok: v == 1, err: err}
}

// parseAcquireScript reads an acquire script's {status, counter[, holder]}.
func parseAcquireScript(cmd *redis.Cmd, o *acquireReq) reply {
	r, err := cmd.Slice()
	if err != nil {
		return reply{err: err}
	}
	if len(r) < 2 {
		return reply{err: fmt.Errorf("redlock: unexpected acquire reply %v", r)}
	}
	status, ok1 := r[0].(int64)
	text, ok2 := r[1].(string)
	if !ok1 || !ok2 {
		return reply{err: fmt.Errorf("redlock: unexpected acquire reply %v", r)}
	}
	if status < 0 {
		return reply{err: fmt.Errorf("%w: up %ss, less than the restart delay %ds", ErrNodeRecovering, text, o.minUptime)}
	}
	counter, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		// Granted or not, the counter is unusable: an error makes the
		// attempt release this node if it granted.
		return reply{err: fmt.Errorf("redlock: fencing counter %s is not a number: %w", o.fenceKey, err)}
	}
	rep := reply{ok: status > 0, counter: counter}
	if len(r) > 2 && !rep.ok {
		rep.holder, _ = r[2].(string)
	}
	return rep
}

func (n *redisNode) subscribe() subscription {
	// No channel yet: go-redis connects on the first SUBSCRIBE.
	return &redisSubscription{ps: n.client.Subscribe(context.Background())}
}

// redisSubscription adapts a go-redis PubSub.
type redisSubscription struct {
	ps *redis.PubSub
}

func (s *redisSubscription) subscribe(ctx context.Context, channels ...string) error {
	return s.ps.Subscribe(ctx, channels...)
}

func (s *redisSubscription) unsubscribe(ctx context.Context, channels ...string) error {
	return s.ps.Unsubscribe(ctx, channels...)
}

func (s *redisSubscription) messages() <-chan *redis.Message { return s.ps.Channel() }

func (s *redisSubscription) close() error { return s.ps.Close() }

// unsent reports whether err proves that the request cannot have taken
// effect: it was never sent (see errUnsent), the node was skipped as down,
// the connection could not be dialled, or the node refused it while
// recovering from a restart. Any other error leaves the outcome unknown.
func unsent(err error) bool {
	var opErr *net.OpError
	return errors.Is(err, errUnsent) || errors.Is(err, ErrNodeDown) || errors.Is(err, ErrNodeRecovering) ||
		(errors.As(err, &opErr) && opErr.Op == "dial")
}

// unreachable reports whether err says the node could not be reached (a
// dial, read or write failure, a closed connection), as opposed to an answer
// from the node, or a request the library itself did not send.
func unreachable(err error) bool {
	if err == nil || errors.Is(err, errUnsent) || errors.Is(err, ErrNodeRecovering) {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errNoAnswer)
}

// clientAddr names a client's server for errors and duplicate checks.
func clientAddr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case interface{ Options() *redis.Options }:
		return c.Options().Addr
	case interface{ Options() *redis.ClusterOptions }:
		return strings.Join(c.Options().Addrs, ",")
	}
	return fmt.Sprintf("%T", c)
}
