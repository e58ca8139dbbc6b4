package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/redlock-go/redlock/internal/node"
)

// Semaphore is a handle on one named counting semaphore of a [Redlock]: at
// most permits holders at a time, across the N nodes. Create it with
// [Redlock.NewSemaphore].
//
// Each node admits at most permits holders of the name; a permit is held
// when a quorum of nodes admitted its holder (see [Semaphore.Quorum]). A
// majority is not enough once permits > 1: with N = 3 and 2 permits, three
// holders admitted by nodes {1,2}, {2,3} and {1,3} would each have a
// majority while every node counts only two. The default quorum,
// N·permits/(permits+1)+1, makes that impossible; [WithQuorum] trades the
// bound for availability.
//
// A Semaphore value is one holder: it holds at most one permit at a time.
// For several permits in one process, use several Semaphore values. It is
// safe for use by several goroutines, in the way a [Mutex] is: Acquire from
// any goroutine waits while the value holds its permit, TryAcquire fails,
// and Release and Extend act on the current permit, whichever goroutine
// took it.
type Semaphore struct {
	r       *Redlock
	name    string
	permits int
	quorum  int
	// kind makes its per-node operations: permits, or read holds.
	kind sharing
	cfg  config
	// report tells the Semaphore's Observer of node failures (nil: none).
	report reportFunc

	mu    sync.Mutex // guards lease, busy and the fields of the lease
	lease *lease     // the current permit; nil when none is held
	busy  bool       // an acquisition is in flight
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
		return nil, invalid("empty semaphore name")
	}
	if permits < 1 {
		return nil, invalid("permits must be at least 1, got %d", permits)
	}
	cfg := r.cfg
	cfg.reentrant, cfg.fencing, cfg.renew = false, false, false // the mutexes' defaults
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	if cfg.reentrant || cfg.fencing {
		return nil, invalid("semaphores support neither WithReentrant nor WithFencing")
	}
	n := r.pool.size()
	q := cfg.quorum
	if q == 0 {
		q = semQuorum(n, permits)
	}
	if q > n {
		return nil, invalid("quorum %d is more than the %d nodes", q, n)
	}
	if r.sharded && node.Slotted(name, node.PermitsKey(name)) == "" {
		return nil, invalid("semaphore name %q has braces but no hash tag, so its permit count cannot share its Redis Cluster slot; "+
			"give the name a hash tag, such as %q", name, "{"+strings.NewReplacer("{", "", "}", "").Replace(name)+"}")
	}
	if err := r.track(0); err != nil { // counts nothing: only ErrClosed
		return nil, err
	}
	return &Semaphore{r: r, name: name, permits: permits, quorum: q, kind: permitsOf(permits), cfg: cfg, report: r.reporter(cfg.observer)}, nil
}

// Name returns the semaphore's name, which is its key on every node.
func (s *Semaphore) Name() string { return s.name }

// Quorum returns how many nodes must admit a holder for it to hold a
// permit: N·permits/(permits+1)+1 (integer division) unless [WithQuorum]
// set it. That is the majority for one permit; for more, N = 5 needs 4
// nodes with 2 or 3 permits (one node may fail) and all 5 from 4 permits
// on (none may fail).
func (s *Semaphore) Quorum() int { return s.quorum }

// TryAcquire makes exactly one attempt to take a permit: it asks every
// node at once to admit a new random token (a script drops the node's
// expired permits, then admits the token if fewer than permits holders are
// left), and succeeds when a quorum admitted it with validity left (see
// [Semaphore.Until]). It returns once the outcome is certain; a node that
// has not answered by the node timeout counts as failed, and a node that
// is down (see [Redlock.Health]) is skipped.
//
// On failure it returns an error wrapping [ErrNotAcquired], one
// [*NodeError] per failed node, and ctx's error if ctx ended. Before
// returning it gives the permit back on every node that had admitted the
// token when the outcome was decided; nodes that failed or had not
// answered, and all of them when ctx has ended, are released in the
// background. If ctx has already ended, TryAcquire makes no attempt. It
// fails at once, without I/O, when this Semaphore already holds a permit
// or another of its acquisitions is in flight.
func (s *Semaphore) TryAcquire(ctx context.Context) error {
	return s.observe(ctx, s.kind.kinds()[1], func(ctx context.Context) (int, error) {
		_, err := s.tryAcquire(ctx)
		return 1, err
	})
}

// observe runs one call of s, whose result run returns, between its
// Observer's OpStart and OpEnd (directly when it has none).
func (s *Semaphore) observe(ctx context.Context, kind OpKind, run func(context.Context) (int, error)) error {
	o := s.cfg.observer
	if o == nil || ctx == nil {
		_, err := run(ctx)
		return err
	}
	op := Op{Kind: kind, Name: s.name}
	octx := o.OpStart(ctx, op)
	attempts, err := run(octx)
	o.OpEnd(octx, op, OpResult{Err: err, Canceled: err != nil && ctx.Err() != nil, Attempts: attempts})
	return err
}

// tryAcquire is TryAcquire; on failure it also describes the attempt.
func (s *Semaphore) tryAcquire(ctx context.Context) (acquisition, error) {
	if ctx == nil {
		return acquisition{}, invalid("nil context")
	}
	if err := ctx.Err(); err != nil {
		return acquisition{}, errors.Join(fmt.Errorf("%w: context done before the attempt", ErrNotAcquired), err)
	}
	if err := s.begin(); err != nil {
		return acquisition{}, err
	}
	defer s.finish()
	id, err := uuid.NewRandom() // crypto/rand: tokens must not be guessable or repeat
	if err != nil {
		return acquisition{}, errors.Join(fmt.Errorf("%w: token", ErrNotAcquired), err)
	}
	token := id.String()
	op := s.kind.acquire(s.name, token, &s.cfg)
	a, err := s.r.acquirePermit(ctx, permitTry{op: op, undo: s.kind.undo(s.name, token), cfg: &s.cfg, report: s.report, quorum: s.quorum})
	if err != nil {
		return a, err
	}
	s.hold(ctx, token, a)
	return acquisition{}, nil
}

// errHeldHere and errInFlight are the failures of an attempt that this
// Semaphore's own state refused, without I/O.
var (
	errHeldHere = fmt.Errorf("%w: this semaphore already holds a permit", ErrNotAcquired)
	errInFlight = fmt.Errorf("%w: another acquisition of this semaphore is in flight", ErrNotAcquired)
)

// begin marks an acquisition in flight, unless the Semaphore holds a
// permit or another acquisition is in flight.
func (s *Semaphore) begin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.busy:
		return errInFlight
	case s.lease != nil && s.lease.err == nil:
		return errHeldHere
	}
	s.busy = true
	return nil
}

// finish ends the acquisition begin marked.
func (s *Semaphore) finish() {
	s.mu.Lock()
	s.busy = false
	s.mu.Unlock()
}

// minUptime is the least uptime, in whole seconds, at which a node may
// grant under restart delay d (0: no check). Redis reports
// uptime_in_seconds as the difference of two truncated wall-clock seconds,
// which can run up to a second ahead of the time really passed: one more
// second keeps the node out for at least d.
func minUptime(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d+time.Second-1)/time.Second) + 1
}

// hold makes acquisition a, of token, the Semaphore's permit, and starts
// its renewal when asked to (WithRenewal).
func (s *Semaphore) hold(ctx context.Context, token string, a acquisition) {
	l := &lease{token: token, id: token, acq: a, holds: 1, done: make(chan struct{})}
	s.mu.Lock()
	old := s.lease
	s.lease = l
	l.loss = time.AfterFunc(s.untilLoss(l), func() { s.end(l, fmt.Errorf("%w: validity ran out", ErrLockLost)) })
	s.mu.Unlock()
	if old != nil {
		s.end(old, fmt.Errorf("%w: acquired again", ErrLockLost))
	}
	if s.cfg.renew {
		renewal{r: s.r, cfg: &s.cfg, mu: &s.mu, once: s.renewOnce}.start(holdContext(ctx), l)
	}
}

// untilLoss is how long from now until l counts as lost (see lossMargin).
// Called with s.mu held.
func (s *Semaphore) untilLoss(l *lease) time.Duration {
	return time.Until(l.acq.until.Add(-lossMargin(s.cfg.ttl)))
}

// end ends permit l with cause, once; later calls do nothing.
func (s *Semaphore) end(l *lease, cause error) {
	s.mu.Lock()
	if l.err != nil {
		s.mu.Unlock()
		return
	}
	l.err = cause
	l.loss.Stop()
	s.mu.Unlock()
	if o := s.cfg.observer; o != nil {
		// Before Done closes: whoever sees Done closed finds the end
		// observed.
		o.HoldEnd(Hold{Name: s.name, Acquired: l.acq.start, Lost: errors.Is(cause, ErrLockLost), Err: cause})
	}
	close(l.done) // once: only the call that set l.err gets here
}
