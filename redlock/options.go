package redlock

import (
	"math"
	"time"
)

// Defaults of the options. Each option's doc repeats its default.
const (
	DefaultTTL           = 10 * time.Second
	DefaultNodeTimeout   = 100 * time.Millisecond
	DefaultDriftFactor   = 0.01
	DefaultRetryDelayMin = 10 * time.Millisecond
	DefaultRetryDelayMax = 200 * time.Millisecond
)

// An Option configures a [Redlock] or a [Mutex]. Every option is accepted
// by both [New] and [Redlock.NewMutex]: given to New it sets the default for
// every mutex of that Redlock, given to NewMutex it applies to that mutex
// only. An invalid value makes New or NewMutex return an error wrapping
// [ErrInvalidArgument]; nothing is corrected silently.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// config is the full set of settings one Mutex runs with.
type config struct {
	ttl         time.Duration
	nodeTimeout time.Duration
	driftFactor float64
	tries       int // 0: until the context ends
	delayMin    time.Duration
	delayMax    time.Duration
}

func defaultConfig() config {
	return config{
		ttl:         DefaultTTL,
		nodeTimeout: DefaultNodeTimeout,
		driftFactor: DefaultDriftFactor,
		delayMin:    DefaultRetryDelayMin,
		delayMax:    DefaultRetryDelayMax,
	}
}

// WithTTL sets the lock's time to live on each node: the key expires that
// long after the node set it, so a holder that dies frees the lock by then.
// The validity a holder may rely on is shorter (see [Mutex.Until]). It must
// be a positive whole number of milliseconds, longer than the node timeout
// and than the drift allowance. Default: 10s ([DefaultTTL]).
func WithTTL(ttl time.Duration) Option {
	return optionFunc(func(c *config) error {
		if ttl <= 0 {
			return invalid("ttl must be positive, got %v", ttl)
		}
		if ttl%time.Millisecond != 0 {
			return invalid("ttl must be a whole number of milliseconds, got %v", ttl)
		}
		c.ttl = ttl
		return nil
	})
}

// WithNodeTimeout bounds each call to one node: a node that has not
// answered by then counts as failed for that operation, whatever the
// client's own read and write timeouts are (the library does not rely on
// go-redis applying context deadlines to sockets). Keep it far below the
// TTL: a few times the round trip to the farthest node. It must be positive
// and shorter than the TTL. Default: 100ms ([DefaultNodeTimeout]).
func WithNodeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return invalid("node timeout must be positive, got %v", d)
		}
		c.nodeTimeout = d
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
			return invalid("drift factor must be in [0, 0.5), got %v", f)
		}
		c.driftFactor = f
		return nil
	})
}

// WithTries bounds how many attempts [Mutex.Lock] makes before it returns
// [ErrNotAcquired]. Zero means no bound: Lock tries until it acquires the
// lock or its context ends. It must not be negative. Default: 0.
func WithTries(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return invalid("tries must not be negative, got %d", n)
		}
		c.tries = n
		return nil
	})
}

// WithRetryDelay sets the back-off between the attempts of [Mutex.Lock].
// Before attempt k+1 (k ≥ 1) Lock sleeps a uniformly random duration in
// [min, min(max, min×2^(k-1))]: randomised so that contenders do not retry
// in lockstep, growing so that a long wait does not hammer the nodes.
// Both must be positive and min ≤ max. Default: 10ms and 200ms
// ([DefaultRetryDelayMin], [DefaultRetryDelayMax]).
func WithRetryDelay(minDelay, maxDelay time.Duration) Option {
	return optionFunc(func(c *config) error {
		if minDelay <= 0 || maxDelay < minDelay {
			return invalid("retry delay needs 0 < min <= max, got min %v, max %v", minDelay, maxDelay)
		}
		c.delayMin, c.delayMax = minDelay, maxDelay
		return nil
	})
}

// apply applies opts in order, then checks the settings against each other.
func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			return invalid("nil option")
		}
		if err := o.apply(c); err != nil {
			return err
		}
	}
	if c.nodeTimeout >= c.ttl {
		return invalid("node timeout %v must be shorter than the ttl %v", c.nodeTimeout, c.ttl)
	}
	if drift(c.ttl, c.driftFactor) >= c.ttl {
		return invalid("ttl %v leaves no validity after the drift allowance %v", c.ttl, drift(c.ttl, c.driftFactor))
	}
	return nil
}
