package redlock

import (
	"context"
	"reflect"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/node"
)

// Redlock is a set of N independent Redis masters on which locks are taken
// by majority. Create it with [New] and take locks through the [Mutex]
// values that [Redlock.NewMutex] returns.
//
// A Redlock is safe for use by any number of goroutines. It owns the
// goroutines that talk to the nodes; [Redlock.Close] waits for them. It does
// not own the clients: closing them stays the caller's job, after Close.
type Redlock struct {
	e   *engine
	cfg config // defaults for every primitive
}

// New returns a Redlock over the given clients, one per independent Redis
// master. The lock's key is the same on every node, so each client must
// address a different server (a cluster client counts as one node).
//
// Any N ≥ 1 works; a lock needs N/2+1 nodes, so N nodes tolerate
// (N-1)/2 failed ones: 1 → 0, 2 → 0, 3 → 1, 4 → 1, 5 → 2, 7 → 3. An even N
// tolerates no more failures than N-1 and costs one more round trip.
//
// The options set the defaults of every mutex created from this Redlock.
// New does no I/O. It returns an error wrapping [ErrInvalidArgument] for no
// clients, a nil client, a client given twice (or two clients with the same
// address), or an invalid option.
func New(clients []redis.UniversalClient, opts ...Option) (*Redlock, error) {
	if len(clients) == 0 {
		return nil, invalid("no clients")
	}
	nodes := make([]node.Node, len(clients))
	seen := make(map[string]int, len(clients))
	for i, c := range clients {
		if isNil(c) {
			return nil, invalid("client %d is nil", i)
		}
		for j := range i {
			if sameClient(clients[j], c) {
				return nil, invalid("clients %d and %d are the same client", j, i)
			}
		}
		addr := node.ClientAddr(c)
		if j, dup := seen[addr]; dup {
			return nil, invalid("clients %d and %d both address %s", j, i, addr)
		}
		if addr != node.FailoverAddr { // the master comes from the sentinels: see identify.go
			seen[addr] = i
		}
		nodes[i] = node.NewRedis(c)
	}
	return newRedlock(nodes, opts...)
}

// newRedlock builds a Redlock over any nodes; tests pass fakes.
func newRedlock(nodes []node.Node, opts ...Option) (*Redlock, error) {
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	if cfg.quorum != 0 {
		return nil, errQuorumOption
	}
	r := &Redlock{e: newEngine(nodes, cfg.observer), cfg: cfg}
	if err := r.checkAck(cfg); err != nil {
		return nil, err
	}
	return r, nil
}

// NewMutex returns a mutex for the lock called name. The name is the key
// used on every node as is: callers namespace their own names. The options
// override, for this mutex only, those given to [New]. NewMutex does no I/O;
// it returns an error wrapping [ErrInvalidArgument] for an empty name or an
// invalid option, and [ErrClosed] after [Redlock.Close].
func (r *Redlock) NewMutex(name string, opts ...Option) (*Mutex, error) {
	if name == "" {
		return nil, invalid("empty mutex name")
	}
	cfg := r.cfg
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	return r.mutexWith(name, cfg)
}

// mutexWith returns a Mutex called name with the options cfg.
func (r *Redlock) mutexWith(name string, cfg config) (*Mutex, error) {
	if err := r.checkAck(cfg); err != nil {
		return nil, err
	}
	if cfg.quorum != 0 {
		return nil, errQuorumOption
	}
	if cfg.fencing && r.e.sharded && node.Slotted(name, node.FenceKey(name)) == "" {
		return nil, invalid("lock name %q has braces but no hash tag, so no other key can share its Redis Cluster slot: "+
			"a fenced lock keeps its counter beside it; give the name a hash tag, such as %q", name, "{"+strings.NewReplacer("{", "", "}", "").Replace(name)+"}")
	}
	if err := r.e.open(); err != nil {
		return nil, err
	}
	var kind lockKind = plainLock{}
	if cfg.reentrant {
		re, err := newReentrant()
		if err != nil {
			return nil, err
		}
		kind = re
	}
	return &Mutex{h: holder{e: r.e, name: name, cfg: cfg, report: r.e.reporter(cfg.observer), kind: kind}, lock: kind}, nil
}

// errQuorumOption is the error of WithQuorum given to New or NewMutex.
var errQuorumOption = invalid("WithQuorum applies to semaphores only: a lock's quorum is a majority")

// Quorum returns how many nodes must agree for a lock to be held: N/2+1.
func (r *Redlock) Quorum() int { return quorum(r.e.pool.size()) }

// Close stops new operations and renewal, and waits until every goroutine
// the Redlock started has returned, or until ctx ends, whose error it then
// returns.
// Operations return before all their node calls have: a call to a slow or
// paused node, or the release that follows a failed acquisition, may run on
// after Lock, Unlock or Extend returned, until it finishes or times out.
// Close is where a program (or a leak-checking test) waits for them. A
// sent call ends when its node answers or its client's own timeouts fire
// (the library hands go-redis no deadline: see [WithNodeTimeout]), so with
// a silent node Close may wait for the client's read timeout (3s by
// default). Probing of down nodes stops, and releases still owed to them
// are dropped (see [Redlock.Health]). Locks still held are not released:
// their keys expire after their TTL, and their acquisitions end as lost
// when their validity runs out. Calls after Close return [ErrClosed]; Close
// itself may be called again.
func (r *Redlock) Close(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	return r.e.close(ctx)
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
	if cfg.ack.Replicas > 0 && r.e.sharded {
		return invalid("replica acknowledgement (WithReplicaAck) is not supported for Redis Cluster or Ring nodes")
	}
	return nil
}
