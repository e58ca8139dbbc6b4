package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	// reenter marks a reentrant acquisition by an owner that already holds
	// the lock: it never creates the key.
	reenter bool
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
	// another value.
	acquire(ctx context.Context, r *request) (ok bool, err error)
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
	key    string
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
	c.ctx, c.cmd, c.script, c.args, c.cb = nil, nil, nil, nil, nil
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
	c.ctx, c.cmd, c.script, c.args = nil, nil, nil, nil
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
		for _, s := range []*redis.Script{scripts.Release, scripts.Extend, scripts.AcquireReentrant, scripts.ReleaseReentrant, scripts.ExtendReentrant} {
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
			c.cmd = c.script.Run(ctx, n.client, []string{c.key}, c.args...)
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

// evalsha prepares a call running script with key and args.
func evalsha(ctx context.Context, script *redis.Script, key string, args ...any) *call {
	c := callPool.Get().(*call)
	c.script, c.key, c.args = script, key, args
	cmdArgs := make([]any, 0, 3+len(args))
	cmdArgs = append(cmdArgs, "evalsha", script.Hash(), 1, key)
	cmdArgs = append(cmdArgs, args...)
	c.cmd = redis.NewCmd(ctx, cmdArgs...)
	return c
}

func (n *redisNode) acquire(ctx context.Context, r *request) (bool, error) {
	if r.reentrant {
		again := "0"
		if r.reenter {
			again = "1"
		}
		cmd, err := n.do(ctx, evalsha(ctx, scripts.AcquireReentrant, r.key, r.token, r.ttl.Milliseconds(), again))
		if err != nil {
			return false, err
		}
		v, err := cmd.(*redis.Cmd).Int64()
		return v > 0, err
	}
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
		if r.all {
			all = "1"
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

// unsent reports whether err proves that the command never reached the
// node, so that it cannot have taken effect: it was dropped from the queue,
// or the connection could not be dialled. Any other error leaves the
// outcome unknown.
func unsent(err error) bool {
	var opErr *net.OpError
	return errors.Is(err, errUnsent) || (errors.As(err, &opErr) && opErr.Op == "dial")
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
