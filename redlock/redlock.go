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
func (r *Redlock) NewMutex(name string, opts ...Option) (*Mutex, error) {
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
	if err := r.newOnly(cfg); err != nil {
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

// newOnly refuses, in the options of a primitive, those only New takes.
func (r *Redlock) newOnly(cfg config) error {
	if cfg.NoScripts != r.cfg.NoScripts || cfg.ClockTolerance != r.cfg.ClockTolerance || cfg.SafeQuorum != r.cfg.SafeQuorum || cfg.logger != r.cfg.logger {
		return errNewOnlyOption
	}
	return nil
}

// errNewOnlyOption is the error of WithoutScripts or WithClockTolerance
// given to anything but New.
var errNewOnlyOption = engine.Invalid("WithoutScripts, WithClockTolerance, WithSafeQuorum and WithLogger apply to New only: how a node is spoken to, whether its clock is trusted, whether it is safe, and who hears of it, are the node's, not one lock's")

// Quorum returns how many nodes must agree for a lock to be held: N/2+1.
func (r *Redlock) Quorum() int { return quorum.Majority(r.e.Pool.Size()) }

// Close stops new operations and renewal, ends the acquisitions still
// held, and waits until every goroutine the Redlock started has returned,
// or until ctx ends.
//
// Locks, permits and read locks still held are not released: their keys
// stay on the nodes until their TTL. Their acquisitions end at Close:
// Done closes and Err wraps [ErrLockLost] (nothing keeps or watches them
// any more), the Observer hears of each end before Close returns, and no
// timer of theirs fires after it. Probing of down nodes stops, and
// releases still owed to them are dropped (see [Redlock.Health]).
//
// Operations return before all their node calls have: a call to a slow or
// paused node, or the release that follows a failed acquisition, may run
// on after Lock, Unlock or Extend returned. Close waits for such a call as
// long as the library could still be waiting for it (the longest node
// timeout in use, and a second more). A call that the node's client holds
// longer than that (go-redis ignores the context of a socket read without
// ContextTimeoutEnabled, and retries a failing dial for up to 25 s with
// its default options, detached from any context) is left to the client:
// Close stops the node's workers without waiting for it, and it ends at
// the client's own timeout. So with go-redis' default options a silent or
// misconfigured node costs Close about a second, not the client's
// timeouts.
//
// When ctx ends first, Close still stops what it can and returns an error
// wrapping ctx.Err() that says what was still running. Calls after Close
// return [ErrClosed]; Close itself may be called again.
func (r *Redlock) Close(ctx context.Context) error {
	if ctx == nil {
		return engine.Invalid("nil context")
	}
	return r.e.Close(ctx)
}

// NewMultiMutex returns a Mutex that holds every one of names or none: one
// lock over several resources. On each node one script takes all the
// names or none of them (and extends and releases them together), so no
// node ever keeps part of the lock. Two multi-name locks with names in
// common cannot deadlock, whatever the order of their names: neither ever
// holds some of its names on a node while it waits for the others there,
// and across nodes they settle as two contenders for one name do (see the
// package documentation on split votes). A plain Mutex on one of the names
// is refused while the multi-name lock holds it, and the other way round.
//
// The Mutex's methods behave as for one name: Lock, TryLock, Unlock,
// Extend, renewal, Done and Err. Its [Mutex.Name] is names[0], and
// [Mutex.Names] all of them. [Redlock.Inspect] and [Redlock.ForceUnlock]
// work on any one of the names; forcing one free leaves the lock lost at
// its next extension, as it would a plain Mutex.
//
// The names must be distinct and not empty, and when a node is a Redis
// Cluster they must share a hash slot: give them one hash tag
// ("{orders}:7", "{orders}:8"). A multi-name lock is neither reentrant
// ([WithReentrant]) nor fenced ([WithFencing]): each is refused with
// [ErrInvalidArgument], as is bad input. A Lock that waits on a
// multi-name lock tries again after each back-off ([WithRetryDelay]): it
// is neither queued with the names' waiters nor woken by their releases
// (notification is off, even when WithNotification(true) is given). Its own releases are announced on each
// name's channel, which wakes the waiters of every name.
// One name alone gives a plain Mutex.
func (r *Redlock) NewMultiMutex(names []string, opts ...Option) (*Mutex, error) {
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
	switch {
	case cfg.Reentrant:
		return nil, engine.Invalid("a multi-name lock cannot be reentrant")
	case cfg.Fencing:
		return nil, engine.Invalid("a multi-name lock is not fenced: fence each resource with its own lock, or give the resources one name")
	case r.e.Sharded && !node.SameSlot(names):
		return nil, engine.Invalid("lock names %s hash to different Redis Cluster slots, and a node takes all of them in one script: "+
			"give them one hash tag, such as %q and %q", quoteAll(names), "{"+names[0]+"}:a", "{"+names[0]+"}:b")
	}
	cfg.Listen = false
	m := new(Mutex)
	if err := r.initMutex(m, names[0], cfg, &multiLock{also: append([]string(nil), names[1:]...)}); err != nil {
		return nil, err
	}
	return m, nil
}

// NewSemaphore returns a counting semaphore called name with the given
// number of permits. The name is the semaphore's key on every node (a
// sorted set of holders), with its permit count beside it, name +
// ":redlock:permits"; every Semaphore of a name must have the same
// permits: a node that holds permits of another count refuses with
// [ErrMisconfigured], naming both counts. A [Mutex] of the same name is
// refused the same way, and so is a Semaphore where a Mutex holds the name.
//
// The options override, for this semaphore only, those given to [New].
// [WithQuorum] sets its quorum. [WithRenewal] renews each permit (every
// TTL/3, as a lock's) until [Semaphore.Release], its loss, or the end of
// the context it was acquired with. [WithReentrant] and [WithFencing] are
// not supported: given to NewSemaphore they are an error; given to New they
// are defaults for mutexes, and a semaphore ignores them, as it ignores a
// WithRenewal given to New.
// NewSemaphore does no I/O; it returns an error wrapping
// [ErrInvalidArgument] for an empty name, permits below 1, a quorum above
// N or an invalid option, and [ErrClosed] after [Redlock.Close].
func (r *Redlock) NewSemaphore(name string, permits int, opts ...Option) (*Semaphore, error) {
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
	if err := r.newOnly(cfg); err != nil {
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
	if err := r.e.Track(0); err != nil { // counts nothing: only ErrClosed
		return nil, err
	}
	return &Semaphore{sh: newShared(r.e, name, cfg, q, newPermits(permits))}, nil
}

// NewRWMutex returns a reader-writer lock called name. The name is the
// lock's key on every node, as for a [Mutex]: a writer's token, or the
// readers' hash (each reader's token and when it expires); a waiting
// writer's mark is kept beside it, name + ":redlock:writer".
//
// The options override, for this lock only, those given to [New].
// [WithFencing] gives each write acquisition a fencing token (see
// [RWMutex.Fence]); read locks have none. [WithRenewal] renews both kinds
// of hold. [WithReplicaAck] applies to the write lock only. [WithReentrant]
// and [WithQuorum] are not supported. NewRWMutex does no I/O; it returns
// an error wrapping [ErrInvalidArgument] for an empty name or an invalid
// option, and [ErrClosed] after [Redlock.Close].
func (r *Redlock) NewRWMutex(name string, opts ...Option) (*RWMutex, error) {
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
