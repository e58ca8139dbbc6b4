package redlock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

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
	// sharded is set for a Redis Cluster or a Ring: keys that a script uses
	// together must hash to one slot (see inSlot).
	sharded bool
	// learned is, for a Sentinel-managed client, the address of the
	// master it reached (see masterAddr); nil for other clients.
	learned *atomic.Pointer[string]
	start   sync.Once
	stopped sync.Once
	queue   chan *call
	stop    chan struct{}
	wg      sync.WaitGroup
}

// Batching limits. workers bounds the round trips in flight per node (and
// the connections the queue holds): two, so that requests arriving while
// one round trip is in flight leave together in the next, which costs the
// node and the client one read and one write per batch rather than per
// request (four cost about a third more CPU per lock+unlock pair at 64
// goroutines; one lost a fifth of the throughput against containers, with
// no second round trip to overlap a slow one: see docs/PERFORMANCE.md).
// maxBatch bounds one pipeline; queueLen bounds the requests waiting for a
// worker.
const (
	workers  = 2
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
	n := &redisNode{
		client: c, address: clientAddr(c), sharded: isSharded(c),
		queue: make(chan *call, queueLen), stop: make(chan struct{}),
	}
	if rc, ok := c.(*redis.Client); ok && n.address == failoverAddr {
		n.learned = masterAddr(rc)
	}
	return n
}

// masters holds, per Sentinel-managed client, the address of the master
// its last connection reached (see masterAddr). Entries go with their
// clients.
var masters sync.Map // weak.Pointer[redis.Client] → *atomic.Pointer[string]

// masterAddr returns where the address of the master that c's connections
// reach is kept. go-redis reports only a placeholder address for a
// Sentinel-managed client, and learns the master's from the sentinels
// when it dials; a dial hook, added once per client, notes the address
// each new connection reached: after a failover, go-redis drops its
// connections to the old master and dials the new one. No command is sent
// for it, so it needs no permission.
func masterAddr(c *redis.Client) *atomic.Pointer[string] {
	key := weak.Make(c)
	if v, ok := masters.Load(key); ok {
		return v.(*atomic.Pointer[string])
	}
	at := new(atomic.Pointer[string])
	if v, loaded := masters.LoadOrStore(key, at); loaded {
		return v.(*atomic.Pointer[string])
	}
	runtime.AddCleanup(c, func(k weak.Pointer[redis.Client]) { masters.Delete(k) }, key)
	c.AddHook(dialHook{at: at})
	return at
}

// dialHook notes the remote address of each connection a client dials.
type dialHook struct{ at *atomic.Pointer[string] }

func (h dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil && conn.RemoteAddr() != nil {
			a := conn.RemoteAddr().String() + " (Sentinel-managed master)"
			h.at.Store(&a)
		}
		return conn, err
	}
}

func (dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (n *redisNode) addr() string {
	if n.learned != nil {
		if a := n.learned.Load(); a != nil {
			return *a
		}
	}
	return n.address
}

// failoverAddr is the address go-redis reports for every Sentinel-managed
// client: the master's address comes from the sentinels, and changes with
// failovers.
const failoverAddr = "FailoverClient"

// identify asks the servers behind the client who they are: the run id of
// each (one server, or each master of a cluster or ring), which is unique
// to a server process, so that two clients of the same servers are found
// out.
func (n *redisNode) identify(ctx context.Context) ([]string, error) {
	var (
		mu  sync.Mutex
		ids []string
	)
	one := func(ctx context.Context, c redis.Cmdable) error {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		id := infoField(info, "run_id")
		if id == "" {
			return fmt.Errorf("redlock: no run_id in INFO server")
		}
		mu.Lock()
		ids = append(ids, id)
		mu.Unlock()
		return nil
	}
	var err error
	switch c := n.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return one(ctx, c) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return one(ctx, c) })
	default:
		err = one(ctx, c)
	}
	return ids, err
}

// infoField returns field's value in an INFO reply ("" when absent).
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

func (n *redisNode) do(ctx context.Context, sendBy time.Time, o op, done func(reply)) {
	n.start.Do(n.run)
	c := callPool.Get().(*call)
	c.ctx, c.sendBy, c.op, c.done = ctx, sendBy, o, done
	n.prepare(c)
	if c.cmd == nil {
		c.finish(reply{ok: true}) // nothing to send (see prepare)
		return
	}
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
	pipe := n.client.Pipeline()
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
		n.send(pipe, batch)
	}
}

// send makes one round trip for batch and hands each call its reply. Calls
// whose sendBy has passed are answered errUnsent without being sent.
func (n *redisNode) send(pipe redis.Pipeliner, batch []*call) {
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
		for _, c := range batch {
			_ = pipe.Process(ctx, c.cmd)
		}
		_, _ = pipe.Exec(ctx) // each command keeps its own error
	}
	for _, c := range batch {
		if c.script != nil && c.cmd.Err() != nil && redis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") {
			// The node lost its script cache (a restart): EVAL loads it.
			keys, args := evalParts(c.cmd.Args())
			c.cmd = c.script.Run(ctx, n.client, keys, args...)
		}
	}
	for _, c := range batch {
		c.finish(n.parse(c))
	}
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
			n.script(c, scripts.AcquireReentrant, n.keysOf(o.key, o.fenceKey), o.token, o.ttl.Milliseconds(), again, o.minUptime)
		case o.fenceKey != "" || o.minUptime > 0:
			n.script(c, scripts.Acquire, n.keysOf(o.key, o.fenceKey), o.token, o.ttl.Milliseconds(), o.minUptime)
		default:
			// A script rather than SET key token NX GET PX ttl, which does
			// the same: its reply is nil on a grant, which go-redis turns
			// into an error that costs the client far more than the script
			// costs the node.
			args := o.enc.args(false)
			if args == nil {
				args = o.enc.keep(false, evalArgs(scripts.AcquirePlain, []string{o.key}, o.token, o.ttl.Milliseconds()))
			}
			n.shared(c, scripts.AcquirePlain, args)
		}
	case *fenceReq:
		reentrant := "0"
		if o.reentrant {
			reentrant = "1"
		}
		n.script(c, scripts.Fence, n.keysOf(o.key, o.fenceKey), o.token, o.fence, reentrant)
	case *releaseReq:
		s := scripts.Release
		if o.reentrant {
			s = scripts.ReleaseReentrant
		}
		args := o.enc.args(n.sharded)
		if args == nil {
			var kb [2]string
			keys := append(kb[:0], o.key)
			if q := n.inSlot(o.key, o.queueKey); o.channel != "" && q != "" {
				keys = append(keys, q)
			}
			if o.reentrant {
				args = evalArgs(s, keys, o.token, strconv.Itoa(int(o.drop)), o.channel, o.notice)
			} else {
				args = evalArgs(s, keys, o.token, o.channel)
			}
			args = o.enc.keep(n.sharded, args)
		}
		n.shared(c, s, args)
	case *queueReq:
		// Plain commands: several per acquisition, a script each would
		// cost the node ten times as much.
		key := n.inSlot(o.lock, o.key)
		switch {
		case key == "":
			// No key can share the lock's slot: waiters are not queued on
			// this node, and its releases wake them all. Nothing to send.
			c.cmd = nil
		case o.remove:
			c.cmd = redis.NewIntCmd(c.ctx, "zrem", key, o.member)
		case o.ttl > 0:
			c.cmd = redis.NewIntCmd(c.ctx, "pexpire", key, o.ttl.Milliseconds())
		default:
			c.cmd = redis.NewIntCmd(c.ctx, "zadd", key, "nx", o.score, o.member)
		}
	case *extendReq:
		s := scripts.Extend
		if o.reentrant {
			s = scripts.ExtendReentrant
		}
		args := o.enc.args(false)
		if args == nil {
			args = o.enc.keep(false, evalArgs(s, []string{o.key}, o.token, o.ttl.Milliseconds()))
		}
		n.shared(c, s, args)
	case *inspectReq:
		n.prepareInspect(c, o)
	case *forceReq:
		n.prepareForce(c, o)
	}
}

// keysOf is key, followed by fenceKey when it is set (see inSlot).
func (n *redisNode) keysOf(key, fenceKey string) []string {
	if fenceKey == "" {
		return []string{key}
	}
	return []string{key, n.inSlot(key, fenceKey)}
}

// inSlot returns key, which the lock name keeps beside its own (name + a
// suffix), as this node stores it. A plain node stores it as it is. On a
// Redis Cluster (or a Ring) a script's keys must hash to one slot, so
// key is renamed where needed to hash like name: a name with a hash tag
// keeps its tag, and key is unchanged; a name without braces becomes the
// tag ("{orders}:redlock:fence" hashes like "orders"); a name with braces
// but no usable tag ("a{}b") cannot share its slot with any other key: ""
// (NewMutex refuses fencing for such a name on such a node, and waiters
// are not queued there).
func (n *redisNode) inSlot(name, key string) string {
	if !n.sharded || key == "" {
		return key
	}
	return slotted(name, key)
}

// slotted is inSlot for a sharded node.
func slotted(name, key string) string {
	if !strings.ContainsAny(name, "{}") {
		return "{" + name + "}" + strings.TrimPrefix(key, name)
	}
	if open := strings.IndexByte(name, '{'); open >= 0 {
		if end := strings.IndexByte(name[open+1:], '}'); end > 0 {
			return key // the name's tag stays the key's first one
		}
	}
	return ""
}

// isSharded reports whether c spreads keys over several servers by slot.
func isSharded(c redis.UniversalClient) bool {
	switch c.(type) {
	case *redis.ClusterClient, *redis.Ring:
		return true
	}
	return false
}

// script makes c run s with keys and args through EVALSHA.
func (n *redisNode) script(c *call, s *redis.Script, keys []string, args ...any) {
	c.script = s
	c.cmd = redis.NewCmd(c.ctx, evalArgs(s, keys, args...)...)
}

// shared makes c run s through EVALSHA with args, built by evalArgs and
// shared by the commands of one request to every node of a kind (see
// encoding).
func (n *redisNode) shared(c *call, s *redis.Script, args []any) {
	c.script = s
	c.cmd = redis.NewCmd(c.ctx, args...)
}

// encoding is a request's command arguments, per kind of node (plain or
// sharded, whose keys may differ: see inSlot). go-redis only reads a
// command's arguments, so the requests every node of a lock gets on the
// hot path encode them once, not once per node.
type encoding struct {
	enc [2]atomic.Pointer[[]any]
}

func kind(sharded bool) int {
	if sharded {
		return 1
	}
	return 0
}

// args returns the arguments kept for nodes of a kind, nil before keep.
func (e *encoding) args(sharded bool) []any {
	if p := e.enc[kind(sharded)].Load(); p != nil {
		return *p
	}
	return nil
}

// keep keeps args for nodes of a kind unless another node's call kept
// them first, and returns those kept.
func (e *encoding) keep(sharded bool, args []any) []any {
	if e.enc[kind(sharded)].CompareAndSwap(nil, &args) {
		return args
	}
	return e.args(sharded)
}

// evalArgs is the command EVALSHA s.Hash() len(keys) keys... args...
func evalArgs(s *redis.Script, keys []string, args ...any) []any {
	out := make([]any, 0, 3+len(keys)+len(args))
	out = append(out, "evalsha", sha(s), len(keys))
	for _, k := range keys {
		out = append(out, k)
	}
	return append(out, args...)
}

// shas are the scripts' hashes, boxed once.
var shas = func() map[*redis.Script]any {
	m := map[*redis.Script]any{}
	for _, s := range append(scripts.All, scripts.SetFenced) {
		m[s] = s.Hash()
	}
	return m
}()

// sha is s.Hash() as a command argument.
func sha(s *redis.Script) any {
	if h, ok := shas[s]; ok {
		return h
	}
	return s.Hash()
}

// evalParts splits evalArgs' command back into its keys and arguments.
func evalParts(cmd []any) (keys []string, args []any) {
	n, _ := cmd[2].(int)
	for _, k := range cmd[3 : 3+n] {
		keys = append(keys, k.(string))
	}
	return keys, cmd[3+n:]
}

// parse reads c's reply as its op's answer.
func (n *redisNode) parse(c *call) reply {
	if rep, ok := parseOperator(c); ok {
		return rep // inspect.go
	}
	err := c.cmd.Err()
	switch o := c.op.(type) {
	case *acquireReq:
		switch {
		case err != nil:
			return reply{err: err}
		case c.script == scripts.AcquirePlain:
			return parseAcquirePlain(c.cmd.(*redis.Cmd))
		}
		return parseAcquireScript(c.cmd.(*redis.Cmd), o)
	}
	if err != nil {
		return reply{err: err}
	}
	if _, ok := c.op.(*queueReq); ok {
		return reply{ok: true}
	}
	if _, ok := c.op.(*releaseReq); ok {
		if id, ok := c.cmd.(*redis.Cmd).Val().(string); ok {
			return reply{gone: true, server: id} // the key was absent: the node's run id
		}
	}
	v, err := c.cmd.(*redis.Cmd).Int64()
	if _, ok := c.op.(*releaseReq); ok && err == nil {
		switch {
		case v > 1: // 1 + 2 × the clients the announcement reached, + 1 if it named a waiter
			return reply{ok: true, heard: int(v-1) / 2, named: (v-1)%2 == 1}
		case v == 0:
			return reply{gone: true}
		}
	}
	return reply{ok: v == 1, err: err}
}

// parseAcquirePlain reads acquire_plain.lua's reply: 1 granted, a
// competitor's token, or 0 for a reentrant lock.
func parseAcquirePlain(cmd *redis.Cmd) reply {
	switch v := cmd.Val().(type) {
	case int64:
		return reply{ok: v == 1}
	case string:
		return reply{holder: v} // the script answers 1 for this token's own
	}
	return reply{err: fmt.Errorf("redlock: unexpected acquire reply %v", cmd.Val())}
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
	return errors.As(err, &netErr) || tlsFailure(err) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errNoAnswer)
}

// misconfigured reports whether err is a refusal that no retry can change
// (see ErrMisconfigured): an error reply about permissions, authentication,
// cluster slots, a key of the wrong type or an unknown command, or a failed
// TLS handshake.
func misconfigured(err error) bool {
	if err == nil {
		return false
	}
	if tlsFailure(err) {
		return true
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, prefix := range []string{"NOPERM", "NOAUTH", "WRONGPASS", "CROSSSLOT", "WRONGTYPE", "ERR unknown command"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	// Redis 7.0 reports a script's refused command with a plain ERR.
	return strings.HasPrefix(msg, "ERR The user executing the script can't")
}

// tlsFailure reports a TLS handshake that failed for a reason that stays:
// a certificate not trusted, expired or for another name, TLS spoken to a
// plain port, or an alert from the server (it refused the client's
// certificate).
func tlsFailure(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		header   tls.RecordHeaderError
		opErr    *net.OpError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &header) ||
		errors.As(err, &opErr) && opErr.Op == "remote error"
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
