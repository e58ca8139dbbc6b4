package redlock

import (
	"reflect"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/adapt"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/goredis"
	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/report"
)

// The node pool: the clients a Redlock is made of, New's checks on them,
// how each node is spoken to and waited for, and what the Redlock knows of
// each node's health.

// New returns a Redlock over the given clients, one per independent Redis
// master: each client must address a different server (a cluster client
// counts as one node). Any N ≥ 1 works; a lock needs N/2+1 nodes, so N
// nodes tolerate (N-1)/2 failed ones (see docs/API.md, "How many nodes may
// fail").
//
// The options set the defaults of every value made from this Redlock. New
// does no I/O. It returns an error wrapping [ErrInvalidArgument] for no
// clients, a nil client, a client given twice (or two clients with the
// same address), or an invalid option. It adds a dial hook to each
// *redis.Client, once per client, which stays with the client after Close
// and sends no command (see docs/DEPLOYMENTS.md, "Errors that no retry
// changes").
func New(clients []redis.UniversalClient, opts ...Option) (*Redlock, error) {
	if len(clients) == 0 {
		return nil, engine.Invalid("no clients")
	}
	seen := make(map[string]int, len(clients))
	for i, c := range clients {
		if isNil(c) {
			return nil, engine.Invalid("client %d is nil", i)
		}
		for j := range i {
			if sameClient(clients[j], c) {
				return nil, engine.Invalid("clients %d and %d are the same client", j, i)
			}
		}
		if err := goredis.CheckAddr(c); err != nil {
			return nil, engine.Invalid("client %d: %v", i, err)
		}
		addr := goredis.ClientAddr(c)
		if j, dup := seen[addr]; dup {
			return nil, engine.Invalid("clients %d and %d both address %s", j, i, addr)
		}
		if addr != goredis.FailoverAddr { // the master comes from the sentinels: see internal/engine/identify.go
			seen[addr] = i
		}
	}
	return build(len(clients), func(i int, c node.Config, cfg config) node.Node {
		c.NoScripts = cfg.NoScripts
		return goredis.NewNodeWith(clients[i], c)
	}, opts)
}

func init() { adapt.Build = newOver }

// newOver builds a Redlock over transports, for the packages of other
// clients (see package adapt).
func newOver(ts []node.Transport, opts []any) (any, error) {
	os := make([]Option, len(opts))
	for i, o := range opts {
		var ok bool
		if os[i], ok = o.(Option); !ok {
			return nil, engine.Invalid("option %d is a %T, not a redlock.Option", i, o)
		}
	}
	r, err := build(len(ts), func(i int, c node.Config, cfg config) node.Node {
		c.NoScripts = cfg.NoScripts
		return node.NewOver(ts[i], c)
	}, os)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// newRedlock builds a Redlock over nodes already made; tests pass fakes.
func newRedlock(nodes []node.Node, opts ...Option) (*Redlock, error) {
	return build(len(nodes), func(i int, _ node.Config, _ config) node.Node { return nodes[i] }, opts)
}

// build builds a Redlock over n nodes, node i made by mk with the engine's
// hooks and the Redlock's settings.
func build(n int, mk func(i int, hooks node.Config, cfg config) node.Node, opts []Option) (*Redlock, error) {
	cfg := defaultConfig()
	if err := cfg.applyRedlock(opts); err != nil {
		return nil, err
	}
	if cfg.Quorum != 0 {
		return nil, errQuorumOption
	}
	nodes := make([]node.Node, n) // made by NewEngine, before anything reads them
	r := &Redlock{cfg: cfg}
	ec := engine.Config{
		Now:       clock,
		Tolerance: cfg.ClockTolerance,
		Report:    reporter(cfg.observer, nodes),
		NodeErr:   func(i int, err error) error { return nodeError(nodes, i, err) },
		Admission: func(e *engine.Engine) engine.Admission {
			r.audits = newAuditor(e, n, cfg.ClockTolerance)
			r.audits.judgeBy(cfg)
			return r.audits
		},
	}
	if l, ok := cfg.events().(*logged); ok {
		ec.Watch = func(i int, down bool, since time.Time, cause error) {
			l.nodeChanged(i, nodes[i].Addr(), down, since, cause)
		}
	}
	r.e = engine.NewEngine(n, func(i int, hooks node.Config) node.Node {
		nodes[i] = mk(i, hooks, cfg)
		return nodes[i]
	}, ec)
	if err := r.checkAck(cfg); err != nil {
		return nil, err
	}
	return r, nil
}

func isNil(c redis.UniversalClient) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

func sameClient(a, b redis.UniversalClient) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// checkAck refuses replica acknowledgement when a node is a Redis Cluster
// or Ring: a WAIT after the write cannot follow the key to its server.
func (r *Redlock) checkAck(cfg config) error {
	if cfg.Ack.Replicas > 0 && r.e.Sharded {
		return engine.Invalid("replica acknowledgement (WithReplicaAck) is not supported for Redis Cluster or Ring nodes")
	}
	return nil
}

// WithNodeTimeout bounds each call to one node: a node that has not
// answered by then counts as failed for that operation, whatever the
// client's own timeouts (the call itself ends with them, in the
// background). A node that did not answer in time is down, skipped until
// it answers a background probe (see [Redlock.Health]). Keep it far below
// the TTL: a few times the round trip to the farthest node. It must be
// positive and shorter than the TTL. Default: 100ms.
func WithNodeTimeout(d time.Duration) LockOption {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return engine.Invalid("node timeout must be positive, got %v", d)
		}
		c.NodeTimeout = d
		return nil
	})
}

// WithoutScripts makes every node speak without Lua scripts from the first
// request on, for nodes whose ACL denies @scripting or whose provider
// disabled scripts: a plain Mutex's operations then use the server's own
// commands where it has them, and optimistic transactions (WATCH, MULTI,
// EXEC) for the rest (see [report.NodeCaps]). Without it a node switches by
// itself at its first refusal of a script; the option saves that round
// trip. A [Mutex] works in full without scripts, though its release no
// longer hands the lock over to the oldest queued waiter; [Semaphore],
// [RWMutex] and [Redlock.NewMultiMutex] are refused on such nodes with an
// error wrapping [ErrMisconfigured]. See
// docs/DEPLOYMENTS.md, "Nodes without scripts".
func WithoutScripts() Option {
	return redlockOption(func(c *config) error {
		c.NoScripts = true
		return nil
	})
}

// WithReplicaAck makes a node's grant, extension and fencing token count
// only once replicas of its replicas acknowledged the write within timeout
// (WAIT, sent right after the write on the same connection), for nodes
// that are masters with replicas behind Sentinel or a managed failover. A
// write acknowledged by fewer counts as a failed node for that operation
// ([report.ErrNotReplicated]). Releases are not acknowledged. It does not
// make the write durable on disk, nor choose which replica a failover
// promotes (see docs/DEPLOYMENTS.md, "Replicated masters"). [New] refuses
// it for Redis Cluster and Ring nodes. replicas must be at least 1 and
// timeout positive and shorter than the node timeout, which bounds a write
// and its acknowledgement together. Default: off.
func WithReplicaAck(replicas int, timeout time.Duration) LockOption {
	return optionFunc(func(c *config) error {
		if replicas < 1 {
			return engine.Invalid("replica acknowledgement needs at least 1 replica, got %d", replicas)
		}
		if timeout <= 0 || timeout%time.Millisecond != 0 {
			return engine.Invalid("replica acknowledgement timeout must be a positive whole number of milliseconds, got %v", timeout)
		}
		c.Ack = node.Ack{Replicas: replicas, Timeout: timeout}
		return nil
	})
}

// Health returns what the Redlock knows of each node's health, in the order
// of the clients given to [New]. It does no I/O.
func (r *Redlock) Health() []report.NodeHealth {
	out := make([]report.NodeHealth, r.e.Pool.Size())
	for i := range out {
		h := report.NodeHealth{Index: i, Addr: r.e.Pool.Addr(i)}
		h.Down, h.Since, h.OwedReleases, h.Err = r.e.Pool.Health(i)
		h.Misconfigured = r.e.Pool.Refused(i)
		h.FeaturesOff = r.e.Features.Of(i)
		h.Speaks = r.e.Pool.Way(i).String()
		h.Caps = report.NodeCaps(r.e.Pool.Caps(i))
		if r.e.Guard != nil {
			h.Clock = r.e.Guard.Refused(i)
		}
		h.Audit = r.audits.of(i)
		out[i] = h
	}
	return out
}
