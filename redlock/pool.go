package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
)

// Per-node I/O. This file is the only one that talks to a Redis node: the
// algorithm in quorum.go sees each node as a [node], one round trip per
// method, so the transport can change (pipelining, batching concurrent
// callers into one round trip) without touching the algorithm.

// request is one lock operation as a node sees it.
type request struct {
	key string
	// token is the acquisition's random token, or for a reentrant lock the
	// owner id of the Mutex.
	token     string
	ttl       time.Duration
	reentrant bool
	// channel is where a release that frees the lock publishes, so that
	// waiters try again at once; "" publishes nothing. A plain lock
	// publishes its token; a reentrant one publishes notice, unique to the
	// acquisition, since its token (the owner id) repeats.
	channel string
	notice  string
	// all makes a reentrant release drop every hold instead of one.
	all bool
	// undo marks the release that undoes a failed acquisition: for a
	// reentrant lock it drops one hold and deletes the key if none is left.
	undo bool
	// reenter marks a reentrant acquisition by an owner that already holds
	// the lock: it never creates the key.
	reenter bool
	// fenceKey is the name's fencing counter, "" when the lock is not
	// fenced; fence is the token a fence call records.
	fenceKey string
	fence    uint64
	// minUptime, when positive, is the least uptime in whole seconds at
	// which a node may grant an acquisition (see WithRestartDelay).
	minUptime int64
}

// node is one independent Redis master as the algorithm sees it. The ctx of
// each call carries the node timeout; a transport that cannot honour it is
// still safe, because the algorithm stops waiting at that deadline itself.
type node interface {
	// acquire takes the lock if it is free: it sets key to token with the
	// request's TTL if key does not exist (a reentrant lock also takes one
	// more hold when token already owns it). ok is true when key now holds
	// token, including when an earlier try of the same call, retried by the
	// client, had set it; ok is false, with a nil error, when key holds
	// another value. For a fenced request, counter is the name's fencing
	// counter on the node, read in the same atomic step, whatever ok is. A
	// node that has been up less than the request's minUptime changes
	// nothing and returns an error wrapping ErrNodeRecovering.
	acquire(ctx context.Context, r *request) (ok bool, counter uint64, err error)
	// fence raises the name's fencing counter to r.fence (never lowers it)
	// and reports whether key still holds token.
	fence(ctx context.Context, r *request) (ok bool, err error)
	// release deletes key if it holds token (a reentrant lock drops one or
	// all holds, and the key once none is left). ok is false when it did not.
	release(ctx context.Context, r *request) (ok bool, err error)
	// extend sets key's time to live if it holds token; it never creates
	// key. ok is false when key did not hold token.
	extend(ctx context.Context, r *request) (ok bool, err error)
	// subscribe opens a subscription to the node's pub/sub channels.
	subscribe() subscription
	// close stops what the node runs in the background; calls after it
	// wait for their context.
	close()
	// addr names the node in errors.
	addr() string
}

// asyncNode is a node that can run release and extend without a goroutine
// of the caller's: cb runs on the node's own worker once the reply is in,
// or at once if the call could not be queued. cb must not block.
type asyncNode interface {
	node
	startRelease(ctx context.Context, r *request, cb func(ok bool, err error))
	startExtend(ctx context.Context, r *request, cb func(ok bool, err error))
}

// subscription is one pub/sub connection to a node. It reconnects and
// re-subscribes by itself; messages published while it is down are lost.
type subscription interface {
	subscribe(ctx context.Context, channels ...string) error
	unsubscribe(ctx context.Context, channels ...string) error
	// messages delivers what is published on the subscribed channels; it is
	// closed by close.
	messages() <-chan *redis.Message
	close() error
}

// redisNode is a node reached through a go-redis client. Its commands go
// through a batching queue: a few worker goroutines per node each take the
// oldest waiting command plus every other one queued meanwhile and send
// them as one pipeline, one round trip. A lone caller's command leaves at
// once, alone; under load, commands that arrive while a round trip is in
// flight share the next one, which is where most of the cost of a lock lies
// (system calls and server wake-ups per round trip, not bytes).
type redisNode struct {
	client  redis.UniversalClient
	address string
	// retries says whether the client may send a command twice (go-redis
	// turns MaxRetries -1 into 0 and the default 0 into 3). Only then must acquire tell a retried SET of its own
	// from another holder's key, at the cost of a nil reply on success.
	retries bool

	start   sync.Once
	stopped sync.Once
	queue   chan *call
	stop    chan struct{}
	wg      sync.WaitGroup
}

// Batching limits. workers bounds the round trips in flight per node (and
// the connections the queue holds); maxBatch bounds one pipeline.
const (
	workers  = 4
	maxBatch = 128
)

// call is one command waiting for its round trip. Like an http.Request it
// carries its context, whose deadline bounds the round trip it joins.
type call struct {
	ctx    context.Context //nolint:containedctx // a request in flight
	cmd    redis.Cmder
	script *redis.Script // set for EVALSHA, to fall back to EVAL on NOSCRIPT
	args   []any
	keys   []string
	done   chan struct{}     // receives once the reply (or error) is in cmd
	cb     func(redis.Cmder) // instead of done, for calls nobody waits on
}

// finish hands c its reply: to its callback, or to the caller in do.
func (c *call) finish() {
	if c.cb == nil {
		c.done <- struct{}{}
		return
	}
	cb, cmd := c.cb, c.cmd
	c.ctx, c.cmd, c.script, c.args, c.keys, c.cb = nil, nil, nil, nil, nil, nil
	callPool.Put(c)
	cb(cmd)
}

// enqueue queues c for a worker; if that cannot happen before ctx ends or
// the node closes, c finishes at once as unsent.
func (n *redisNode) enqueue(ctx context.Context, c *call) {
	n.start.Do(n.run)
	c.ctx = ctx
	select {
	case n.queue <- c:
		return
	default:
	}
	// The queue is full (the node is slow or stalled): wait for room in a
	// goroutine, so that the caller goes on queueing to the other nodes. It
	// belongs to the node, whose close stops it and waits for it.
	n.wg.Go(func() {
		select {
		case n.queue <- c:
		case <-ctx.Done():
			c.cmd.SetErr(errUnsent)
			c.finish()
		case <-n.stop:
			c.cmd.SetErr(errUnsent)
			c.finish()
		}
	})
}

func (n *redisNode) startRelease(ctx context.Context, r *request, cb func(bool, error)) {
	n.startScript(ctx, n.releaseCall(ctx, r), cb)
}

func (n *redisNode) startExtend(ctx context.Context, r *request, cb func(bool, error)) {
	n.startScript(ctx, n.extendCall(ctx, r), cb)
}

// startScript queues c, a script call answering 1 for yes, with cb.
func (n *redisNode) startScript(ctx context.Context, c *call, cb func(bool, error)) {
	c.cb = func(cmd redis.Cmder) {
		if err := cmd.Err(); err != nil {
			cb(false, err)
			return
		}
		v, err := cmd.(*redis.Cmd).Int64()
		cb(v == 1, err)
	}
	n.enqueue(ctx, c)
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func newRedisNode(c redis.UniversalClient) *redisNode {
	// Only a plain client can be known not to retry; a cluster client
	// also resends on redirects.
	retries := true
	if c, ok := c.(interface{ Options() *redis.Options }); ok {
		retries = c.Options().MaxRetries > 0
	}
	return &redisNode{
		client: c, address: clientAddr(c), retries: retries,
		queue: make(chan *call, 4*maxBatch), stop: make(chan struct{}),
	}
}

func (n *redisNode) addr() string { return n.address }

// errUnsent is the error of a call whose deadline passed while it waited
// in the queue: it was never sent, so it cannot have taken effect.
var errUnsent = errors.New("redlock: node timeout passed before the command was sent")

// do sends c through the queue and returns the command holding its reply.
// Once c is queued, do waits for the worker whatever ctx does: the caller
// must learn whether the command was sent, and a later command to this node
// (the release after a failed attempt) must not overtake it. The worker
// drops a call whose ctx has ended before it was sent; one already sent is
// bounded by the client's timeouts (by ctx too with ContextTimeoutEnabled).
// The algorithm itself stops waiting for the node at the node timeout.
func (n *redisNode) do(ctx context.Context, c *call) (redis.Cmder, error) {
	n.start.Do(n.run)
	c.ctx = ctx
	select {
	case n.queue <- c:
	case <-ctx.Done():
		return nil, errUnsent
	case <-n.stop:
		return nil, errUnsent
	}
	<-c.done
	cmd := c.cmd
	c.ctx, c.cmd, c.script, c.args, c.keys = nil, nil, nil, nil, nil
	callPool.Put(c)
	return cmd, cmd.Err()
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
		for _, s := range []*redis.Script{scripts.Release, scripts.Extend, scripts.AcquireReentrant, scripts.ReleaseReentrant,
			scripts.ExtendReentrant, scripts.Acquire, scripts.Fence} {
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
// whose deadline has passed are answered errUnsent without being sent.
func (n *redisNode) send(batch []*call) {
	live := batch[:0]
	for _, c := range batch {
		if c.ctx.Err() != nil {
			c.cmd.SetErr(errUnsent)
			c.finish()
			continue
		}
		live = append(live, c)
	}
	batch = live
	if len(batch) == 0 {
		return
	}
	// The round trip is bounded by the latest deadline among its calls.
	ctx := batch[0].ctx
	for _, c := range batch[1:] {
		if later(c.ctx, ctx) {
			ctx = c.ctx
		}
	}
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
			// Before any call finishes: ctx belongs to one of them.
			c.cmd = c.script.Run(ctx, n.client, c.keys, c.args...)
		}
	}
	for _, c := range batch {
		c.finish()
	}
}

// later reports whether a's deadline is later than b's (none is latest).
func later(a, b context.Context) bool {
	da, okA := a.Deadline()
	db, okB := b.Deadline()
	return okB && (!okA || da.After(db))
}

// close stops the workers, then answers every call still queued errUnsent.
// It is called once no fan-out is running, so nothing new is queued.
func (n *redisNode) close() {
	n.stopped.Do(func() { close(n.stop) })
	n.wg.Wait()
	for {
		select {
		case c := <-n.queue:
			c.cmd.SetErr(errUnsent)
			c.finish()
		default:
			return
		}
	}
}

// evalsha prepares a call running script with one key and args.
func evalsha(ctx context.Context, script *redis.Script, key string, args ...any) *call {
	return evalshaKeys(ctx, script, []string{key}, args...)
}

// evalshaKeys prepares a call running script with keys and args.
func evalshaKeys(ctx context.Context, script *redis.Script, keys []string, args ...any) *call {
	c := callPool.Get().(*call)
	c.script, c.keys, c.args = script, keys, args
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, "evalsha", script.Hash(), len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmdArgs = append(cmdArgs, args...)
	c.cmd = redis.NewCmd(ctx, cmdArgs...)
	return c
}

// scriptKeys is key, followed by the fencing counter when r is fenced.
func scriptKeys(r *request) []string {
	if r.fenceKey == "" {
		return []string{r.key}
	}
	return []string{r.key, r.fenceKey}
}

func (n *redisNode) acquire(ctx context.Context, r *request) (bool, uint64, error) {
	if r.reentrant {
		again := "0"
		if r.reenter {
			again = "1"
		}
		return n.acquireScript(ctx, evalshaKeys(ctx, scripts.AcquireReentrant, scriptKeys(r),
			r.token, r.ttl.Milliseconds(), again, r.minUptime), r)
	}
	if r.fenceKey != "" || r.minUptime > 0 {
		return n.acquireScript(ctx, evalshaKeys(ctx, scripts.Acquire, scriptKeys(r),
			r.token, r.ttl.Milliseconds(), r.minUptime), r)
	}
	ok, err := n.set(ctx, r)
	return ok, 0, err
}

// acquireScript runs an acquire script and reads its {status, n} reply.
func (n *redisNode) acquireScript(ctx context.Context, c *call, r *request) (bool, uint64, error) {
	cmd, err := n.do(ctx, c)
	if err != nil {
		return false, 0, err
	}
	reply, err := cmd.(*redis.Cmd).Slice()
	if err != nil {
		return false, 0, err
	}
	if len(reply) != 2 {
		return false, 0, fmt.Errorf("redlock: unexpected acquire reply %v", reply)
	}
	status, ok1 := reply[0].(int64)
	text, ok2 := reply[1].(string)
	if !ok1 || !ok2 {
		return false, 0, fmt.Errorf("redlock: unexpected acquire reply %v", reply)
	}
	if status < 0 {
		return false, 0, fmt.Errorf("%w: up %ss, less than the restart delay %ds", ErrNodeRecovering, text, r.minUptime)
	}
	counter, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		// Granted or not, the counter is unusable: an error makes the
		// attempt release this node if it granted.
		return false, 0, fmt.Errorf("redlock: fencing counter %s is not a number: %w", r.fenceKey, err)
	}
	return status > 0, counter, nil
}

func (n *redisNode) fence(ctx context.Context, r *request) (bool, error) {
	reentrant := "0"
	if r.reentrant {
		reentrant = "1"
	}
	return n.scriptResult(ctx, evalshaKeys(ctx, scripts.Fence, scriptKeys(r), r.token, r.fence, reentrant))
}

// set takes a plain lock with one SET command.
func (n *redisNode) set(ctx context.Context, r *request) (bool, error) {
	c := callPool.Get().(*call)
	if !n.retries {
		// SET key token NX PX ttl: "OK" when set, nil when held.
		cmd := redis.NewStatusCmd(ctx, "set", r.key, r.token, "px", r.ttl.Milliseconds(), "nx")
		c.cmd = cmd
		_, err := n.do(ctx, c)
		switch {
		case errors.Is(err, redis.Nil):
			return false, nil
		case err != nil:
			return false, err
		}
		return true, nil
	}
	// SET key token NX GET PX ttl (Redis 7.0 or later), for clients that
	// retry. GET makes the answer tell "absent, now set" (nil) from "already
	// holds this value", so a SET that go-redis retried after a network
	// error, whose first try was applied, still counts as granted, and is
	// released if the attempt fails, instead of passing for "held by
	// another". The TTL is always sent in milliseconds.
	cmd := redis.NewStringCmd(ctx, "set", r.key, r.token, "nx", "get", "px", r.ttl.Milliseconds())
	c.cmd = cmd
	_, err := n.do(ctx, c)
	switch {
	case errors.Is(err, redis.Nil):
		return true, nil // the key was absent: set to token
	case err != nil && redis.HasErrorPrefix(err, "WRONGTYPE"):
		return false, nil // GET met a key of another type (a reentrant lock): held
	case err != nil:
		return false, err
	}
	return cmd.Val() == r.token, nil // held: by this token, or by another value
}

func (n *redisNode) release(ctx context.Context, r *request) (bool, error) {
	return n.scriptResult(ctx, n.releaseCall(ctx, r))
}

func (n *redisNode) extend(ctx context.Context, r *request) (bool, error) {
	return n.scriptResult(ctx, n.extendCall(ctx, r))
}

func (n *redisNode) releaseCall(ctx context.Context, r *request) *call {
	if r.reentrant {
		all := "0"
		switch {
		case r.all:
			all = "1"
		case r.undo:
			all = "2"
		}
		return evalsha(ctx, scripts.ReleaseReentrant, r.key, r.token, all, r.channel, r.notice)
	}
	return evalsha(ctx, scripts.Release, r.key, r.token, r.channel)
}

func (n *redisNode) extendCall(ctx context.Context, r *request) *call {
	script := scripts.Extend
	if r.reentrant {
		script = scripts.ExtendReentrant
	}
	return evalsha(ctx, script, r.key, r.token, r.ttl.Milliseconds())
}

// scriptResult runs a call whose script returns 1 for yes.
func (n *redisNode) scriptResult(ctx context.Context, c *call) (bool, error) {
	cmd, err := n.do(ctx, c)
	if err != nil {
		return false, err
	}
	v, err := cmd.(*redis.Cmd).Int64()
	return v == 1, err
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

// unsent reports whether err proves that the command cannot have taken
// effect: it was dropped from the queue, the connection could not be
// dialled, or the node refused it while recovering from a restart. Any
// other error leaves the outcome unknown.
func unsent(err error) bool {
	var opErr *net.OpError
	return errors.Is(err, errUnsent) || errors.Is(err, ErrNodeRecovering) || (errors.As(err, &opErr) && opErr.Op == "dial")
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
