package redlock

import (
	"log/slog"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/report"

	"github.com/redlock-go/redlock/redlock/internal/quorum"
)

// Defaults of the options. Each option's doc repeats its default.
const (
	defaultTTL           = 10 * time.Second
	defaultNodeTimeout   = 100 * time.Millisecond
	defaultDriftFactor   = 0.01
	defaultRetryDelayMin = 10 * time.Millisecond
	defaultRetryDelayMax = 200 * time.Millisecond
)

// An Option configures a [Redlock]: [New] takes them. Four apply to the
// Redlock as a whole, to how its nodes are spoken to, trusted and heard
// of: [WithoutScripts], [WithClockTolerance], [WithSafeQuorum] and
// [WithLogger]; they are Options only, and the compiler refuses them
// anywhere else. Every other option is a [LockOption], which is an Option
// too: given to New it sets the default of every value the Redlock makes.
// An invalid value makes New return an error wrapping [ErrInvalidArgument].
type Option interface {
	applyRedlock(*config) error
}

// A LockOption configures one lock, reader-writer lock or semaphore:
// given to [Redlock.NewMutex], [Redlock.NewMultiMutex],
// [Redlock.NewRWMutex], [Redlock.NewSemaphore] or [Redlock.Do] and its
// kin, it applies to that value only, over the defaults given to [New]. An
// invalid value makes the constructor return an error wrapping
// [ErrInvalidArgument]. Not every one applies to every value, which is
// found when the value is made: only NewSemaphore accepts [WithQuorum];
// NewMultiMutex refuses [WithReentrant] and [WithFencing] and always turns
// notification off ([WithNotification]); NewRWMutex refuses WithReentrant;
// NewSemaphore refuses WithReentrant and WithFencing, and leaves out the
// WithReentrant, WithFencing and WithRenewal given to New.
type LockOption interface {
	Option
	apply(*config) error
}

// optionFunc is a LockOption.
type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error        { return f(c) }
func (f optionFunc) applyRedlock(c *config) error { return f(c) }

// redlockOption is an Option that is no LockOption.
type redlockOption func(*config) error

func (f redlockOption) applyRedlock(c *config) error { return f(c) }

// config is the full set of settings one Mutex runs with: the engine's, and
// the Observer.
type config struct {
	engine.Settings
	observer report.Observer // nil: none
	logger   *slog.Logger    // nil: none (see WithLogger)
}

func defaultConfig() config {
	return config{Settings: engine.Settings{
		TTL:            defaultTTL,
		NodeTimeout:    defaultNodeTimeout,
		DriftFactor:    defaultDriftFactor,
		DelayMin:       defaultRetryDelayMin,
		DelayMax:       defaultRetryDelayMax,
		Listen:         true,
		ClockTolerance: quorum.DefaultClockTolerance,
	}}
}

// WithTTL sets the lock's time to live on each node: the key expires that
// long after the node set it, so a holder that dies frees the lock by then.
// The validity a holder may rely on is shorter (see [Mutex.Until]). It must
// be a positive whole number of milliseconds, longer than the node timeout
// and than the drift allowance. Default: 10s.
func WithTTL(ttl time.Duration) LockOption {
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

// WithTries bounds how many attempts [Mutex.Lock] makes before it returns
// [ErrNotAcquired]. Zero means no bound: Lock tries until it acquires the
// lock or its context ends. An attempt refused by a split vote
// ([ErrSplit]) within about a node timeout of the first does not count
// against the bound when it would be the last, as with [Mutex.TryLock]:
// WithTries(1) gets a free lock as TryLock does. It must not be negative.
// Default: 0.
func WithTries(n int) LockOption {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return engine.Invalid("tries must not be negative, got %d", n)
		}
		c.Tries = n
		return nil
	})
}

// WithRetryDelay sets the back-off between the attempts of [Mutex.Lock]:
// before attempt k+1 (k ≥ 1) Lock sleeps a uniformly random duration in
// [min, min(max, min×2^(k-1))]. With notification on, a queued Lock's
// back-off is only the fallback for a lost announcement, drawn from
// [max/2, max]; after a split vote it ranked first in, the sleep is at
// most two attempt durations, twice in a row at most. Both must be
// positive and min ≤ max. Default: 10ms and 200ms.
func WithRetryDelay(minDelay, maxDelay time.Duration) LockOption {
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
// every node (name + ":redlock:waiters") and subscribes to its release
// channels, and a release announces itself to the oldest waiter's process:
// waiters take turns, in the order they came. The back-off
// ([WithRetryDelay]) stays the fallback for lost announcements. When off,
// Lock only polls. The subscriptions are one pub/sub connection per node,
// opened at the first wait and closed by [Redlock.Close]; a Lock leaves the
// queue when it returns, and a name's subscription goes 5 seconds after
// its last waiter. [Redlock.NewMultiMutex] always turns it off. Default:
// on. See docs/API.md, "Waiting by notification, in turn".
func WithNotification(on bool) LockOption {
	return optionFunc(func(c *config) error {
		c.Listen = on
		return nil
	})
}

// WithRenewal keeps an acquired lock alive while it is held: it is
// extended every TTL/3 (see [Mutex.Extend]; a held lock costs a timer, not
// a goroutine: the Redlock's workers make the extensions) until Unlock, the loss of the
// lock, the end of the context given to Lock or TryLock, or [WithMaxHold].
// A failed extension is retried after the retry back-off; if none succeeds
// in time, the lock is lost (see [Mutex.Done]). [Redlock.Do] and
// [Redlock.DoRead] always renew. Given to [Redlock.NewRWMutex] it renews
// read locks too, and given to [Redlock.NewSemaphore] permits, until
// [Semaphore.Release], its loss, or the end of the context it was acquired
// with. Default: off.
func WithRenewal() LockOption {
	return optionFunc(func(c *config) error {
		c.Renew = true
		return nil
	})
}

// WithMaxHold bounds renewal: no extension starts d or more after the
// acquisition, so a holder that never unlocks (a stuck process) keeps the
// lock at most d plus one TTL. It must be positive. Default: no bound.
func WithMaxHold(d time.Duration) LockOption {
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
// when Unlock has been called as many times. The owner is the Mutex value:
// every goroutine using it shares its ownership, and another Mutex, even on
// the same Redlock and name, is another owner and is refused, as is a
// non-reentrant Mutex of the name. On each node the key is a hash that
// counts the acquisition's holds (see docs/API.md, "Reentrancy").
// Default: off.
func WithReentrant() LockOption {
	return optionFunc(func(c *config) error {
		c.Reentrant = true
		return nil
	})
}

// WithFencing gives every acquisition a fencing token, read with
// [Mutex.Fence]: an integer greater than the token of every acquisition of
// the same name that succeeded before this one began, for the protected
// resource to refuse writes with a lower token than one it has seen (see
// [SetFenced]), so that a holder that lost the lock without knowing it is
// refused. It costs a second round trip per acquisition and a key without
// expiry on every node, name + ":redlock:fence". Reentrant locks keep one
// token for all their holds. Default: off. See docs/ALGORITHM.md, "Fencing
// tokens", for how tokens are made and when they may not increase.
func WithFencing() LockOption {
	return optionFunc(func(c *config) error {
		c.Fencing = true
		return nil
	})
}

// apply applies a value's opts in order, then checks the settings
// against each other.
func (c *config) apply(opts []LockOption) error {
	return applyAll(c, opts, LockOption.apply)
}

// applyRedlock is apply for New's opts.
func (c *config) applyRedlock(opts []Option) error {
	return applyAll(c, opts, Option.applyRedlock)
}

// applyAll applies opts to c in order, each with apply, then checks c.
func applyAll[O Option](c *config, opts []O, apply func(O, *config) error) error {
	for _, o := range opts {
		if Option(o) == nil {
			return engine.Invalid("nil option")
		}
		if err := apply(o, c); err != nil {
			return err
		}
	}
	return c.check()
}

// check checks the settings against each other.
func (c *config) check() error {
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
