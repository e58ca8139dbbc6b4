package redlock

import (
	"log/slog"
	"math"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/redlock-go/redlock/internal/node"
)

// Defaults of the options. Each option's doc repeats its default.
const (
	DefaultTTL           = 10 * time.Second
	DefaultNodeTimeout   = 100 * time.Millisecond
	DefaultDriftFactor   = 0.01
	DefaultRetryDelayMin = 10 * time.Millisecond
	DefaultRetryDelayMax = 200 * time.Millisecond
)

// An Option configures a [Redlock] or one of its locks, reader-writer
// locks or semaphores. Given to [New] it sets the default for every value
// the Redlock makes; given to [Redlock.NewMutex], [Redlock.NewMultiMutex],
// [Redlock.NewRWMutex] or [Redlock.NewSemaphore] it applies to that value
// only. An invalid value makes the constructor return an error wrapping
// [ErrInvalidArgument]. Not every option applies to every value: only
// NewSemaphore accepts [WithQuorum]; NewMultiMutex refuses [WithReentrant]
// and [WithFencing] and always turns notification off ([WithNotification]);
// NewRWMutex refuses WithReentrant; NewSemaphore refuses WithReentrant and
// WithFencing, and leaves out the WithReentrant, WithFencing and
// WithRenewal given to New.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// config is the full set of settings one Mutex runs with: the engine's, and
// the Observer.
type config struct {
	engine.Settings
	observer Observer     // nil: none
	logger   *slog.Logger // nil: none (see WithLogger)
}

func defaultConfig() config {
	return config{Settings: engine.Settings{
		TTL:            DefaultTTL,
		NodeTimeout:    DefaultNodeTimeout,
		DriftFactor:    DefaultDriftFactor,
		DelayMin:       DefaultRetryDelayMin,
		DelayMax:       DefaultRetryDelayMax,
		Listen:         true,
		ClockTolerance: quorum.DefaultClockTolerance,
	}}
}

// WithTTL sets the lock's time to live on each node: the key expires that
// long after the node set it, so a holder that dies frees the lock by then.
// The validity a holder may rely on is shorter (see [Mutex.Until]). It must
// be a positive whole number of milliseconds, longer than the node timeout
// and than the drift allowance. Default: 10s ([DefaultTTL]).
func WithTTL(ttl time.Duration) Option {
	return optionFunc(func(c *config) error {
		if ttl <= 0 {
			return engine.Invalid("ttl must be positive, got %v", ttl)
		}
		if ttl%time.Millisecond != 0 {
			return engine.Invalid("ttl must be a whole number of milliseconds, got %v", ttl)
		}
		c.TTL = ttl
		return nil
	})
}

// WithNodeTimeout bounds each call to one node: a node that has not
// answered by then counts as failed for that operation, whatever the
// client's own read and write timeouts are (the library hands go-redis no
// deadline: the call itself ends with the client's timeouts, in the
// background). A node that did not answer in time is down, skipped by later
// operations until it answers a background probe (see [Redlock.Health]). Keep it far below the
// TTL: a few times the round trip to the farthest node. It must be positive
// and shorter than the TTL. Default: 100ms ([DefaultNodeTimeout]).
func WithNodeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return engine.Invalid("node timeout must be positive, got %v", d)
		}
		c.NodeTimeout = d
		return nil
	})
}

// WithDriftFactor sets the clock drift allowance as a fraction of the TTL:
// the validity of an acquisition is shortened by TTL × factor + 2ms, to
// cover nodes whose clocks run faster than ours. It must be in [0, 0.5).
// Default: 0.01 ([DefaultDriftFactor]).
func WithDriftFactor(f float64) Option {
	return optionFunc(func(c *config) error {
		if math.IsNaN(f) || f < 0 || f >= 0.5 {
			return engine.Invalid("drift factor must be in [0, 0.5), got %v", f)
		}
		c.DriftFactor = f
		return nil
	})
}

// WithTries bounds how many attempts [Mutex.Lock] makes before it returns
// [ErrNotAcquired]. Zero means no bound: Lock tries until it acquires the
// lock or its context ends. An attempt refused by a split vote
// ([ErrSplit]) within about a node timeout of the first does not count
// against the bound when it would be the last, as with [Mutex.TryLock]:
// WithTries(1) gets a free lock as TryLock does. It must not be negative.
// Default: 0.
func WithTries(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return engine.Invalid("tries must not be negative, got %d", n)
		}
		c.Tries = n
		return nil
	})
}

// WithRetryDelay sets the back-off between the attempts of [Mutex.Lock].
// Before attempt k+1 (k ≥ 1) Lock sleeps a uniformly random duration in
// [min, min(max, min×2^(k-1))]: randomised so that contenders do not retry
// in lockstep, growing so that a long wait does not hammer the nodes. With
// notification on (the default), a waiting Lock is queued and its turn is
// announced: the back-off is then only the fallback for a lost
// announcement, drawn from [max/2, max]. After an attempt that failed with
// some grants (contenders split a free lock) and ranked first, the sleep is
// at most two attempt durations, twice in a row at most.
// Both must be positive and min ≤ max. Default: 10ms and 200ms
// ([DefaultRetryDelayMin], [DefaultRetryDelayMax]).
func WithRetryDelay(minDelay, maxDelay time.Duration) Option {
	return optionFunc(func(c *config) error {
		if minDelay <= 0 || maxDelay < minDelay {
			return engine.Invalid("retry delay needs 0 < min <= max, got min %v, max %v", minDelay, maxDelay)
		}
		c.DelayMin, c.DelayMax = minDelay, maxDelay
		return nil
	})
}

// WithNotification sets whether [Mutex.Lock] waits for releases to be
// announced. When on, a waiting Lock joins the lock's queue of waiters on
// every node (a sorted set, name + ":redlock:waiters", ordered by when each
// started waiting) and subscribes to the lock's release channel
// ("redlock:released:" + name) and to its Redlock's own channel
// ("redlock:wake:" + a random id). A release pops the oldest waiter from
// each node's queue and announces itself on that waiter's Redlock's channel
// only: waiters take turns, in the order they came, instead of all trying
// at once; with no one popped (a reader's turn, a writer's release), the
// release channel tells every waiter, and a plain lock's release where no
// one is queued tells no one. The back-off stays as the fallback for
// announcements that are lost (a node down, a subscription reconnecting, a
// waiter that died while queued, a release while the waiter's queueing was
// on its way),
// drawn from [max/2, max] of [WithRetryDelay] while queued. When off, Lock
// only polls. The subscriptions are one pub/sub connection per node, opened
// at the first wait and closed by [Redlock.Close]; a Lock leaves the queue
// when it returns, and a name's subscription goes 5 seconds after its last
// waiter. A multi-name lock ([Redlock.NewMultiMutex]) always polls: it turns
// notification off, also when WithNotification(true) is given. Default: on.
func WithNotification(on bool) Option {
	return optionFunc(func(c *config) error {
		c.Listen = on
		return nil
	})
}

// WithRenewal keeps an acquired lock alive while it is held: a goroutine
// extends it every TTL/3 (see [Mutex.Extend]) until Unlock, the loss of the
// lock, the end of the context given to Lock or TryLock, or the bound set
// by [WithMaxHold]. A failed extension is retried after the retry back-off
// until the validity is about to run out; the acquisition is then lost
// ([Mutex.Done] closes, [Mutex.Err] wraps [ErrLockLost]). [Redlock.Do]
// and [Redlock.DoRead] always renew. Given to [Redlock.NewRWMutex] it
// renews read locks too, and given to [Redlock.NewSemaphore] permits (a
// semaphore ignores it as a default of [New]). Default: off.
func WithRenewal() Option {
	return optionFunc(func(c *config) error {
		c.Renew = true
		return nil
	})
}

// WithMaxHold bounds renewal: no extension starts d or more after the
// acquisition, so a holder that never unlocks (a stuck process) keeps the
// lock at most d plus one TTL. It must be positive. Default: no bound.
func WithMaxHold(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return engine.Invalid("max hold must be positive, got %v", d)
		}
		c.MaxHold = d
		return nil
	})
}

// WithReentrant makes the lock reentrant: Lock or TryLock on a Mutex that
// holds it takes one more hold instead of waiting, and the lock is released
// when Unlock has been called as many times. The owner is the Mutex value
// (Go has no thread identity to use): every goroutine using that Mutex
// shares its ownership, and another Mutex, even on the same Redlock and
// name, is another owner and is refused. On each node the key is a hash
// whose one field, the acquisition's token, counts its holds, as Redisson
// stores them (there the field is the thread); each acquisition has a
// token of its own, so that a hold an earlier one left on a node is
// another's and ends with its TTL; a reentrant and a non-reentrant Mutex on the same name refuse each
// other (the key of the other kind counts as held). Default: off (plain string keys).
func WithReentrant() Option {
	return optionFunc(func(c *config) error {
		c.Reentrant = true
		return nil
	})
}

// WithFencing gives every acquisition a fencing token, read with
// [Mutex.Fence] (by work run by [Redlock.Do], through [MutexFrom]): an
// integer greater than the token of every acquisition of the same name that
// succeeded before this one began, to be passed to the protected resource,
// which refuses writes with a lower token than one it has seen (see
// [SetFenced]). A holder that lost the lock without knowing it (a long
// pause, a partition) is then refused instead of overwriting its
// successor's work.
//
// It costs a second round trip per acquisition: the first reads the name's
// counter on every node in the same atomic step as the grant, the second
// writes the maximum read plus one back to every node and counts where the
// lock was still held; the acquisition succeeds only when a quorum did. The
// counter is a key without expiry on every node, name + ":redlock:fence".
// For why the tokens increase, and the data-loss cases where they may not,
// see the package documentation. Reentrant locks keep one token for all
// their holds. Default: off.
func WithFencing() Option {
	return optionFunc(func(c *config) error {
		c.Fencing = true
		return nil
	})
}

// WithRestartDelay makes a node refuse acquisitions while it has been up for
// less than d: a Redis node restarted without persistence has forgotten the
// locks it granted, and until the longest TTL in use has passed since its
// start, its grant could help a second holder to a quorum. This is the
// "delayed restart" of the Redlock description, done by the acquisition
// itself (a script checks the node's uptime_in_seconds), so operators need
// not arrange it and no client has to witness the restart. A refusing node
// counts as failed, with an error wrapping [ErrNodeRecovering].
//
// d must be at least the lock's TTL, and should be the longest TTL any
// client uses on these nodes. Redis reports uptime in whole seconds that
// can run up to one second ahead, so a node refuses for d rounded up to a
// whole second, plus one second.
// Cost: acquisitions run a script that reads INFO on each node instead of a
// plain SET, and a restarted node does not help form a quorum for d. Nodes
// with appendonly yes and appendfsync always keep their locks across a
// restart and do not need it. Zero turns it off. Default: off.
func WithRestartDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return engine.Invalid("restart delay must not be negative, got %v", d)
		}
		c.Restart = d
		return nil
	})
}

// WithReplicaAck makes a node's grant, extension and fencing token count
// only once replicas of its replicas acknowledged the write, within
// timeout: the library sends WAIT replicas timeout right after the write,
// on the same connection. A write acknowledged by fewer counts as a failed
// node for that operation ([ErrNotReplicated]), and a failed acquisition is
// undone on it as on any node. Releases are not acknowledged.
//
// It is for nodes that are masters with replicas behind Sentinel or a
// managed failover: replication is asynchronous, and a master that grants
// and dies before its replica has the key hands the lock to the next
// client on the promoted replica. With the acknowledgement, a node counts
// only when a replica has the key. It does not make the write durable on
// disk (WAIT is about memory), and it cannot choose which replica a
// failover promotes: with several replicas, ask for as many as a failover
// may skip, plus one. Not for Redis Cluster or Ring nodes (a WAIT cannot
// follow the key there): [New] refuses it for them.
//
// replicas must be at least 1 and timeout positive and shorter than the
// node timeout (the WAIT runs inside it); the node timeout then bounds a
// write and its acknowledgement together. Default: off.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
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

// WithQuorum sets how many nodes must grant a [Semaphore]'s permit, for
// callers who prefer availability to a strict bound: with q nodes, at most
// N·permits/q holders (integer division) may hold a permit at once, more
// than permits when q is below the default. The default, N·permits/(permits+1)+1
// (integer division), is the least quorum that admits no more than permits
// holders (see [Semaphore.Quorum]). q must be in [1, N]. Only
// [Redlock.NewSemaphore] accepts it: [New] and [Redlock.NewMutex] return an
// error wrapping [ErrInvalidArgument], since a lock's quorum is always a
// majority. Default: N·permits/(permits+1)+1.
func WithQuorum(q int) Option {
	return optionFunc(func(c *config) error {
		if q < 1 {
			return engine.Invalid("quorum must be at least 1, got %d", q)
		}
		c.Quorum = q
		return nil
	})
}

// WithoutScripts makes every node speak without Lua scripts from the first
// request on, for nodes whose ACL denies @scripting (EVAL, EVALSHA) or
// whose provider disabled them: each node then carries a plain Mutex's
// operations in the server's own commands where it has them (SET NX GET
// PX; SET IFEQ PX on Valkey 8.1 and Redis 8.4; DELIFEQ on Valkey 9, DELEX
// IFEQ on Redis 8.4), batched with its other requests as scripts are, and
// optimistic transactions (WATCH, MULTI, EXEC) for the rest (see
// [NodeCaps]). On a server that has them all the plain Mutex is faster so
// than with scripts, but its release no longer hands the lock over to the
// oldest queued waiter: every waiter wakes and they race (see
// docs/DEPLOYMENTS.md, "Which operations need scripts"). Without this option a
// node switches by itself at its first refusal of a script (the refused
// requests go again without scripts, and the switch is reported once to
// the Observer and in [NodeHealth]); the option only saves that first
// round trip. A [Mutex] works in full without scripts; [Semaphore],
// [RWMutex] and [NewMultiMutex] need them, and are refused on such nodes
// with an error wrapping [ErrMisconfigured] that names scripting (see
// docs/DEPLOYMENTS.md, "Nodes without scripts"). Only [New] accepts it:
// how a node is spoken to is the node's, not one lock's.
func WithoutScripts() Option {
	return optionFunc(func(c *config) error {
		c.NoScripts = true
		return nil
	})
}

// WithSafeQuorum makes every acquisition (a lock, a permit, a read lock)
// refuse while fewer than its quorum of nodes were found safe by their
// last audit (see [Redlock.Audit]): audited, and without an unsafe
// finding (eviction, no persistence, replicas not waited for...). The
// first acquisition waits for the first audit, at most until its context
// ends; a refused one returns at once, with an error wrapping
// [ErrNotAcquired] that names the nodes, and starts another audit (at
// most every five seconds) so that nodes fixed meanwhile count again.
// Only [New] accepts it. Default: off, the audit only reports.
func WithSafeQuorum() Option {
	return optionFunc(func(c *config) error {
		c.SafeQuorum = true
		return nil
	})
}

// DefaultClockTolerance is how far a node's clock may be from this
// process's, or move against it between two replies, and still vote.
const DefaultClockTolerance = time.Second

// WithClockTolerance sets how far a node's clock may be from this
// process's wall clock, or move against its monotonic clock between two
// replies of the node, and the node still vote. Every grant and extension
// arrives with the node's time (TIME, in the same round trip): a node
// outside the tolerance does not vote, for grants or extensions, until it
// has agreed again for the longest TTL in use; each such episode is
// reported once to the Observer and shown in [NodeHealth.Clock], and a
// lease that counted a node whose clock then jumped is lost when too few
// of the nodes that granted it are left ([Mutex.Done] closes, the cause
// wrapping [ErrClockJump]). While a lease is held, each node's clock is
// read once a second. 0 turns the guard off. Only [New] accepts it.
// Default: 1s ([DefaultClockTolerance]); see docs/ALGORITHM.md.
func WithClockTolerance(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return engine.Invalid("clock tolerance must not be negative, got %v", d)
		}
		c.ClockTolerance = d
		return nil
	})
}

// apply applies opts in order, then checks the settings against each other.
func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			return engine.Invalid("nil option")
		}
		if err := o.apply(c); err != nil {
			return err
		}
	}
	if c.NodeTimeout >= c.TTL {
		return engine.Invalid("node timeout %v must be shorter than the ttl %v", c.NodeTimeout, c.TTL)
	}
	if c.Ack.Replicas > 0 && c.Ack.Timeout >= c.NodeTimeout {
		return engine.Invalid("replica acknowledgement timeout %v must be shorter than the node timeout %v", c.Ack.Timeout, c.NodeTimeout)
	}
	if c.Restart > 0 && c.Restart < c.TTL {
		return engine.Invalid("restart delay %v must be at least the ttl %v", c.Restart, c.TTL)
	}
	if quorum.Drift(c.TTL, c.DriftFactor) >= c.TTL {
		return engine.Invalid("ttl %v leaves no validity after the drift allowance %v", c.TTL, quorum.Drift(c.TTL, c.DriftFactor))
	}
	return nil
}
