package redlock

import (
	"context"
	"strings"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/internal/lease"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

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
	e      *engine.Engine
	audits *auditor // each node's last audit (see audit.go)
	cfg    config   // defaults for every primitive
}

// NewMutex returns a mutex for the lock called name. The name is the key
// used on every node as is: callers namespace their own names. The options
// override, for this mutex only, those given to [New]. NewMutex does no I/O;
// it returns an error wrapping [ErrInvalidArgument] for an empty name or an
// invalid option, and [ErrClosed] after [Redlock.Close].
func (r *Redlock) NewMutex(name string, opts ...LockOption) (*Mutex, error) {
	if name == "" {
		return nil, engine.Invalid("empty mutex name")
	}
	cfg := r.cfg
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	return r.mutexWith(name, cfg)
}

// mutexWith returns a Mutex called name with the options cfg.
func (r *Redlock) mutexWith(name string, cfg config) (*Mutex, error) {
	m := new(Mutex)
	if err := r.initMutex(m, name, cfg, nil); err != nil {
		return nil, err
	}
	return m, nil
}

// initMutex makes m a lock of name with cfg, of kind (nil: plain, or
// reentrant as cfg says), in place.
func (r *Redlock) initMutex(m *Mutex, name string, cfg config, kind lockKind) error {
	if err := r.checkAck(cfg); err != nil {
		return err
	}
	if cfg.Quorum != 0 {
		return errQuorumOption
	}
	if cfg.Fencing && r.e.Sharded && node.Slotted(name, node.FenceKey(name)) == "" {
		return engine.Invalid("lock name %q has braces but no hash tag, so no other key can share its Redis Cluster slot: "+
			"a fenced lock keeps its counter beside it; give the name a hash tag, such as %q", name, "{"+strings.NewReplacer("{", "", "}", "").Replace(name)+"}")
	}
	if err := r.e.Open(); err != nil {
		return err
	}
	switch {
	case kind != nil:
	case cfg.Reentrant:
		kind = newReentrant()
	default:
		kind = plainLock{}
	}
	m.h = lease.Holder{Engine: r.e, Name: name, Settings: cfg.Settings, Report: reporter(cfg.observer, r.e.Pool.Nodes), Events: observe(cfg.events(), lockOps), Kind: kind}
	m.lock = kind
	return nil
}

// Quorum returns how many nodes must agree for a lock to be held: N/2+1.
func (r *Redlock) Quorum() int { return quorum.Majority(r.e.Pool.Size()) }

// Close stops new operations and renewal, ends the acquisitions still
// held, and waits until every goroutine the Redlock started has returned,
// or until ctx ends. Calls after Close return [ErrClosed]; Close itself
// may be called again.
//
// Locks, permits and read locks still held are not released: their keys
// stay on the nodes until their TTL. Their acquisitions end: Done closes,
// Err wraps [ErrLockLost], the Observer hears of each end before Close
// returns, and no timer of theirs fires after it. Probing of down nodes
// stops, and releases still owed to them are dropped. Close waits for a
// node call still running (a slow node's, a failed acquisition's release)
// at most until a second past the longest node timeout in use; a call the
// client holds longer is left to the client (see docs/API.md,
// "Concurrency"). When ctx ends first, Close still stops what it can and
// returns an error wrapping ctx.Err() that says what was still running.
func (r *Redlock) Close(ctx context.Context) error {
	if ctx == nil {
		return engine.Invalid("nil context")
	}
	return r.e.Close(ctx)
}

// NewMultiMutex returns a Mutex that holds every one of names or none: one
// lock over several resources. On each node one script takes, extends and
// releases all the names together, so two multi-name locks with names in
// common cannot deadlock, whatever their order. A plain Mutex on one of
// the names is refused while the multi-name lock holds it, and the other
// way round. Its methods behave as for one name; its [Mutex.Name] is
// names[0], [Mutex.Names] all of them. [Redlock.Inspect] and
// [Redlock.ForceUnlock] work on any one of them. One name alone gives a
// plain Mutex.
//
// The names must be distinct and not empty, and share a hash slot on a
// Redis Cluster node (one hash tag: "{orders}:7", "{orders}:8").
// [WithReentrant], [WithFencing] and bad input are refused with
// [ErrInvalidArgument]. Notification is off, even when given: a waiting
// Lock tries again after each back-off, unqueued; its releases wake the
// waiters of every name.
func (r *Redlock) NewMultiMutex(names []string, opts ...LockOption) (*Mutex, error) {
	if err := checkNames(names); err != nil {
		return nil, err
	}
	if len(names) == 1 {
		return r.NewMutex(names[0], opts...)
	}
	cfg := r.cfg
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	cfg.Listen = false
	m := new(Mutex)
	if err := r.initMutex(m, names[0], cfg, &multiLock{also: append([]string(nil), names[1:]...)}); err != nil {
		return nil, err // a Mutex's own checks first, as for one name
	}
	switch {
	case cfg.Reentrant:
		return nil, engine.Invalid("a multi-name lock cannot be reentrant")
	case cfg.Fencing:
		return nil, engine.Invalid("a multi-name lock is not fenced: fence each resource with its own lock, or give the resources one name")
	case r.e.Sharded && !node.SameSlot(names):
		return nil, engine.Invalid("lock names %s hash to different Redis Cluster slots, and a node takes all of them in one script: "+
			"give them one hash tag, such as %q and %q", quoteAll(names), "{"+names[0]+"}:a", "{"+names[0]+"}:b")
	}
	return m, nil
}

// NewSemaphore returns a counting semaphore called name with the given
// number of permits. The name is its key on every node (a sorted set of
// holders), its permit count kept beside it, name + ":redlock:permits". A
// Semaphore of the name with another count, or a Mutex of the name, is
// refused with [ErrMisconfigured] (naming both counts), and so is a
// Semaphore where a Mutex holds the name. The options override, for this
// semaphore only, those given to [New] (see [Option] for those it refuses
// or leaves out). NewSemaphore does no I/O; it returns an error wrapping
// [ErrInvalidArgument] for an empty name, permits below 1, a quorum above
// N or an invalid option, and [ErrClosed] after [Redlock.Close].
func (r *Redlock) NewSemaphore(name string, permits int, opts ...LockOption) (*Semaphore, error) {
	if name == "" {
		return nil, engine.Invalid("empty semaphore name")
	}
	if permits < 1 {
		return nil, engine.Invalid("permits must be at least 1, got %d", permits)
	}
	cfg := r.cfg
	cfg.Reentrant, cfg.Fencing, cfg.Renew = false, false, false // the mutexes' defaults
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	if cfg.Reentrant || cfg.Fencing {
		return nil, engine.Invalid("semaphores support neither WithReentrant nor WithFencing")
	}
	n := r.e.Pool.Size()
	q := cfg.Quorum
	if q == 0 {
		q = quorum.Permits(n, permits)
	}
	if q > n {
		return nil, engine.Invalid("quorum %d is more than the %d nodes", q, n)
	}
	if r.e.Sharded && node.Slotted(name, node.PermitsKey(name)) == "" {
		return nil, engine.Invalid("semaphore name %q has braces but no hash tag, so its permit count cannot share its Redis Cluster slot; "+
			"give the name a hash tag, such as %q", name, "{"+strings.NewReplacer("{", "", "}", "").Replace(name)+"}")
	}
	if err := r.e.Open(); err != nil {
		return nil, err
	}
	return &Semaphore{sh: newShared(r.e, name, cfg, q, newPermits(permits))}, nil
}

// NewRWMutex returns a reader-writer lock called name. The name is the
// lock's key on every node, as for a [Mutex]: a writer's token, or the
// readers' hash; a waiting writer's mark is kept beside it, name +
// ":redlock:writer". The options override, for this lock only, those given
// to [New]: [WithFencing] fences the write acquisitions (see
// [RWMutex.Fence]; read locks have none), [WithRenewal] renews both kinds
// of hold, [WithReplicaAck] applies to the write lock only, and
// [WithReentrant] and [WithQuorum] are refused. NewRWMutex does no I/O; it
// returns an error wrapping [ErrInvalidArgument] for an empty name or an
// invalid option, and [ErrClosed] after [Redlock.Close].
func (r *Redlock) NewRWMutex(name string, opts ...LockOption) (*RWMutex, error) {
	if name == "" {
		return nil, engine.Invalid("empty lock name")
	}
	cfg := r.cfg
	cfg.Reentrant = false // a default for mutexes
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	if cfg.Reentrant {
		return nil, engine.Invalid("a reader-writer lock is not reentrant")
	}
	if r.e.Sharded && node.Slotted(name, node.IntentKey(name)) == "" {
		return nil, engine.Invalid("lock name %q has braces but no hash tag, so a waiting writer's mark cannot share its Redis Cluster slot; "+
			"give the name a hash tag, such as %q", name, "{"+strings.NewReplacer("{", "", "}", "").Replace(name)+"}")
	}
	// One allocation: the write lock's writer id and mark key are made at
	// its first use, and a value only ever read takes none.
	rw := &RWMutex{}
	if err := r.initMutex(&rw.w, name, cfg, &rw.wl); err != nil {
		return nil, err
	}
	rcfg := cfg
	rcfg.Fencing, rcfg.Ack = false, node.Ack{}
	rw.rd = newShared(r.e, name, rcfg, quorum.Majority(r.e.Pool.Size()), newReading())
	return rw, nil
}
