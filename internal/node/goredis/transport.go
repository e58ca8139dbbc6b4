// Package goredis is the node's transport over a go-redis client: each
// node.Cmd travels as a go-redis command, in the client's pipelines and
// pools, and its reply comes back as the protocol reads it. It is the one
// package of the library, with redlock.New's signature, that names
// go-redis: the node layer speaks commands (see package node). It also
// watches what only the client sees: its dials (dial.go, refusal.go), a
// Sentinel-managed master's address (sentinel.go) and a Ring's shards
// (ring.go).
package goredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/life"
	"github.com/redlock-go/redlock/internal/node"
)

// Transport is the node.Transport of a go-redis client. It watches the client's
// dials (see dial.go and refusal.go) and, for a Ring, that every shard
// stays up around a batch (see ring.go).
type Transport struct {
	c       redis.UniversalClient
	address string
	sharded bool
	now     func() time.Time
	// ring is the client when it is a Ring; nil otherwise.
	ring *redis.Ring
	// dials is what the client's dial hook learns (see dial.go); nil for
	// a client of another kind.
	dials *dials
	// master names the master a Sentinel-managed client reached (see
	// sentinel.go); nil for other clients.
	master *masterName
	pipes  sync.Pool // of *pipeWire: a worker's pipeline, reused
	guards guards    // the calls a refused dial ends (see refusal.go)
	heard  atomic.Pointer[listener]
}

// NewNode is NewNodeWith(c, node.Config{}).
func NewNode(c redis.UniversalClient) *node.Redis { return NewNodeWith(c, node.Config{}) }

// NewNodeWith returns the node of client c, made as cfg says, over c's
// Transport. No I/O. The hooks are called on the node's goroutines: they
// must not block.
func NewNodeWith(c redis.UniversalClient, cfg node.Config) *node.Redis {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return node.NewOver(New(c, cfg.Now), cfg)
}

// New returns the Transport of c, whose clock is now. No I/O.
func New(c redis.UniversalClient, now func() time.Time) *Transport {
	g := &Transport{c: c, address: ClientAddr(c), sharded: isSharded(c), now: now}
	g.ring, _ = c.(*redis.Ring)
	if g.dials = dialsOf(c, now); g.dials != nil {
		g.master = g.dials.master
	}
	return g
}

// pipeWire is a pipeline and its buffers, reused.
type pipeWire struct {
	wire
	pipe redis.Pipeliner
}

// Batch implements Transport: one pipeline (one command alone, as go-redis
// sends it). A Ring's batch counts only when every shard was up before it
// and after it (see ringKept).
func (g *Transport) Batch(ctx context.Context, cmds []*node.Cmd) error {
	if g.ring != nil {
		if err := ringWhole(g.ring); err != nil {
			return fmt.Errorf("%w: %w", node.ErrUnsent, err)
		}
	}
	start := g.now()
	p, _ := g.pipes.Get().(*pipeWire)
	if p == nil {
		p = &pipeWire{pipe: g.c.Pipeline()}
	}
	p.send(ctx, g.c, p.pipe, cmds)
	g.pipes.Put(p)
	if g.ring != nil {
		return ringKept(g.ring, start, g.now)
	}
	return nil
}

// Send implements node.Conn.
func (g *Transport) Send(ctx context.Context, cmds ...*node.Cmd) {
	p, _ := g.pipes.Get().(*pipeWire)
	if p == nil {
		p = &pipeWire{pipe: g.c.Pipeline()}
	}
	p.send(ctx, g.c, p.pipe, cmds)
	g.pipes.Put(p)
}

// Server implements node.Transport.
func (g *Transport) Server(ctx context.Context, key string) (node.Conn, error) {
	c, err := g.server(ctx, key)
	if err != nil {
		return nil, err
	}
	return clientConn{c}, nil
}

// OnKey implements node.Transport: the connection of go-redis' Watch, with no
// key watched yet, on the server that keeps key.
func (g *Transport) OnKey(ctx context.Context, key string, fn func(node.Conn) error) error {
	c, err := g.server(ctx, key)
	if err != nil {
		return err
	}
	return c.Watch(ctx, func(tx *redis.Tx) error { return fn(txConn{tx}) })
}

// Each implements node.Transport: every master of a cluster (with
// replicas, every shard), every shard of a ring, else the one server.
func (g *Transport) Each(ctx context.Context, replicas bool, fn func(node.Conn) error) error {
	each := func(_ context.Context, c *redis.Client) error { return fn(clientConn{c}) }
	switch c := g.c.(type) {
	case *redis.ClusterClient:
		if replicas {
			return c.ForEachShard(ctx, each)
		}
		return c.ForEachMaster(ctx, each)
	case *redis.Ring:
		return c.ForEachShard(ctx, each)
	}
	return fn(g)
}

// Ping implements Transport: PING on a connection of the client's own
// pool, after a quiet dial (see QuietDial): a node that refuses
// connections is found down without the client's dial retries, which
// go-redis logs each time.
func (g *Transport) Ping(ctx context.Context) error {
	if err := g.QuietDial(ctx); err != nil {
		return err
	}
	return g.c.Ping(ctx).Err()
}

// Addr implements Transport: the client's address, or for a
// Sentinel-managed client the master its last connection reached.
func (g *Transport) Addr() string {
	if a := g.master.name(); a != "" {
		return a
	}
	return g.address
}

// Sharded implements Transport: a Cluster or a Ring.
func (g *Transport) Sharded() bool { return g.sharded }

// Subscribe implements node.Transport.
func (g *Transport) Subscribe() node.Subscription {
	if r, ok := g.c.(*redis.Ring); ok {
		return newRingSubscription(r) // a Ring's Subscribe needs a channel, and uses one shard
	}
	// No channel yet; its forwarder starts at once (go-redis' channel
	// dials then), as the waiters read Messages at once.
	s := &redisSubscription{ps: g.c.Subscribe(context.Background()), out: make(chan node.Message, 100)}
	msgs := s.ps.Channel()
	s.life.Go(func() { forward(msgs, s.out, s.life.Closing()) })
	return s
}

// server returns the client of the one server that keeps key.
func (g *Transport) server(ctx context.Context, key string) (*redis.Client, error) {
	switch c := g.c.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Ring:
		return c.GetShardClientForKey(key)
	}
	return nil, fmt.Errorf("%w: a client of type %T cannot run transactions", node.ErrMisconfigured, g.c)
}

// clientConn is a client of one server of a cluster or ring.
type clientConn struct{ c *redis.Client }

// Send implements node.Conn.
func (c clientConn) Send(ctx context.Context, cmds ...*node.Cmd) { exec(ctx, c.c, cmds) }

// txConn is one connection taken for a transaction.
type txConn struct{ tx *redis.Tx }

// Send implements node.Conn.
func (t txConn) Send(ctx context.Context, cmds ...*node.Cmd) { exec(ctx, t.tx, cmds) }

// wire carries Cmds over go-redis, reusing its buffers from one round trip
// to the next (a worker's: one goroutine).
type wire struct {
	rcs []redis.Cmder
}

// pipeliner is what makes a pipeline: a client, or a connection taken for
// a transaction.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// wires are the buffers of the round trips outside the batches.
var wires = sync.Pool{New: func() any { return new(wire) }}

// exec sends cmds in one round trip on a pipeline of p's, with a wire of
// the pool's.
func exec(ctx context.Context, p pipeliner, cmds []*node.Cmd) {
	w := wires.Get().(*wire)
	w.exec(ctx, p, cmds)
	wires.Put(w)
}

// processor sends one command.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// exec sends cmds in one round trip on p and answers each.
func (w *wire) exec(ctx context.Context, p pipeliner, cmds []*node.Cmd) {
	w.prepare(ctx, cmds)
	pipe := p.Pipeline()
	for _, rc := range w.rcs {
		_ = pipe.Process(ctx, rc)
	}
	_, err := pipe.Exec(ctx)
	unanswered(w.rcs, err)
	w.answer(cmds)
}

// send is exec on a pipeline of the worker's own (pipe, reused), or, for
// one command, c's Process.
func (w *wire) send(ctx context.Context, c processor, pipe redis.Pipeliner, cmds []*node.Cmd) {
	w.prepare(ctx, cmds)
	if len(w.rcs) == 1 {
		_ = c.Process(ctx, w.rcs[0])
	} else {
		for _, rc := range w.rcs {
			_ = pipe.Process(ctx, rc)
		}
		_, err := pipe.Exec(ctx)
		unanswered(w.rcs, err) // each command keeps its own error
	}
	w.answer(cmds)
}

// prepare makes the go-redis command of each of cmds: one that reads its
// reply as the Cmd Expects it, without boxing it (TIME into a time), else
// a generic one.
func (w *wire) prepare(ctx context.Context, cmds []*node.Cmd) {
	w.rcs = slices.Grow(w.rcs[:0], len(cmds))
	for _, c := range cmds {
		var rc redis.Cmder
		switch {
		case c.Expect == node.ExpectInt:
			rc = redis.NewIntCmd(ctx, c.Args...)
		case c.Expect == node.ExpectText:
			rc = redis.NewStringCmd(ctx, c.Args...)
		case c.Expect == node.ExpectTexts:
			rc = redis.NewStringSliceCmd(ctx, c.Args...)
		case len(c.Args) == 1 && c.Args[0] == "time":
			rc = redis.NewTimeCmd(ctx, c.Args...)
		default:
			rc = redis.NewCmd(ctx, c.Args...)
		}
		w.rcs = append(w.rcs, rc)
	}
}

func (w *wire) answer(cmds []*node.Cmd) {
	for i, c := range cmds {
		answerFrom(c, w.rcs[i])
		w.rcs[i] = nil
	}
	w.rcs = w.rcs[:0]
}

// answerFrom copies rc's reply into c.
func answerFrom(c *node.Cmd, rc redis.Cmder) {
	switch rc := rc.(type) {
	case *redis.TimeCmd:
		c.AnswerTime(rc.Result())
	case *redis.IntCmd:
		c.AnswerInt(rc.Val(), nilErr(rc.Err()))
	case *redis.StringCmd:
		c.AnswerText(rc.Val(), nilErr(rc.Err()))
	case *redis.StringSliceCmd:
		c.AnswerTexts(rc.Val(), nilErr(rc.Err()))
	case *redis.Cmd:
		c.Answer(rc.Val(), nilErr(rc.Err()))
	}
}

// nilErr is err with go-redis' nil reply read as node.ErrNil.
func nilErr(err error) error {
	if errors.Is(err, redis.Nil) { // a hook may wrap it
		return node.ErrNil
	}
	return err
}

// unanswered puts err, the error a pipeline's Exec returned, on every
// command of cmds when none carries an error of its own. go-redis puts a
// pipeline's failure on its commands, except an error reply met while it
// set up the connection: WRONGPASS or NOAUTH to the HELLO or AUTH it sends
// on a new connection. The commands, never sent, then look answered with
// nothing (a nil reply and no error). When one command carries an error,
// the pipeline ran, or go-redis failed each of its commands: every
// command's own reply stands. Call it after every pipeline.
func unanswered[C redis.Cmder](cmds []C, err error) {
	if err == nil || slices.ContainsFunc(cmds, func(c C) bool { return c.Err() != nil }) {
		return
	}
	for _, c := range cmds {
		c.SetErr(err)
	}
}

// redisSubscription adapts a go-redis PubSub.
type redisSubscription struct {
	ps   *redis.PubSub
	out  chan node.Message
	life life.Group // the forwarder
}

func (s *redisSubscription) Subscribe(ctx context.Context, channels ...string) error {
	return s.ps.Subscribe(ctx, channels...)
}

func (s *redisSubscription) Unsubscribe(ctx context.Context, channels ...string) error {
	return s.ps.Unsubscribe(ctx, channels...)
}

func (s *redisSubscription) Messages() <-chan node.Message { return s.out }

// Close closes the subscription, and Messages once its forwarder is done.
func (s *redisSubscription) Close() error {
	if !s.life.Stop() {
		return nil
	}
	err := s.ps.Close()
	_ = s.life.Wait(context.Background())
	close(s.out)
	return err
}

// forward sends what msgs delivers to out, until msgs is closed or stop.
func forward(msgs <-chan *redis.Message, out chan<- node.Message, stop <-chan struct{}) {
	for m := range msgs {
		select {
		case out <- node.Message{Channel: m.Channel, Payload: m.Payload}:
		case <-stop:
			return
		}
	}
}

// isSharded reports whether c spreads keys over several servers by slot.
func isSharded(c redis.UniversalClient) bool {
	switch c.(type) {
	case *redis.ClusterClient, *redis.Ring:
		return true
	}
	return false
}

// ClientAddr names a client's server for errors and duplicate checks.
func ClientAddr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Ring:
		return ringAddr(c)
	case interface{ Options() *redis.Options }:
		return c.Options().Addr
	case interface{ Options() *redis.ClusterOptions }:
		return strings.Join(c.Options().Addrs, ",")
	}
	return fmt.Sprintf("%T", c)
}

// QuietDial checks that the node's server can be dialled at all, with the
// client's own dialer (TLS included) and one try, apart from the client's
// pool: a failed dial there is retried (DialerRetries) and logged by
// go-redis on every command, and the library's background checks of a
// node that is down must not make it log. It closes the connection it
// made. It checks nothing for a cluster, a ring or a Sentinel-managed
// client, whose servers the client finds itself.
func (g *Transport) QuietDial(ctx context.Context) error {
	rc, ok := g.c.(*redis.Client)
	if !ok || g.address == FailoverAddr {
		return nil
	}
	o := rc.Options()
	if o.Dialer == nil {
		return nil
	}
	dctx := ctx
	if o.DialTimeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, o.DialTimeout)
		defer cancel()
	}
	var num uint64
	if g.dials != nil {
		num = g.dials.started.Add(1)
	}
	conn, err := o.Dialer(dctx, o.Network, o.Addr)
	switch {
	case g.dials == nil:
	case err == nil:
		g.dials.connected(num) // the host listens: calls go again (see refusal.go)
	case refusedDial(err):
		// A dial failure as any: LastDialFailure names it, before the
		// calls it fails learn of it.
		f := &node.DialFailure{Err: err, At: g.now()}
		g.dials.record(o.Addr, dialOutcome{n: num, failure: f})
		g.dials.refused(num, f)
	}
	if err != nil {
		return err // "dial tcp ADDR: ..." names the address
	}
	_ = conn.Close()
	return nil
}

// CheckAddr reports an address a client of one server cannot dial as
// written: a TCP address without a port ("localhost"), which go-redis
// would only find out by failing every dial.
func CheckAddr(c redis.UniversalClient) error {
	rc, ok := c.(*redis.Client)
	if !ok {
		return nil
	}
	o := rc.Options()
	if o.Addr == FailoverAddr || o.Network != "" && o.Network != "tcp" && !strings.HasPrefix(o.Network, "tcp") {
		return nil
	}
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return fmt.Errorf("address %q cannot be dialled: %w (write host:port, such as %q)", o.Addr, err, net.JoinHostPort(o.Addr, "6379"))
	}
	// A number or a service name in /etc/services: no network I/O.
	if p, err := net.LookupPort("tcp", port); err != nil || p == 0 {
		return fmt.Errorf("address %q cannot be dialled: port %q is not a port from 1 to 65535 (write host:port, such as %q)", o.Addr, port, net.JoinHostPort(host, "6379"))
	}
	return nil
}
