package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/internal/lease"
	"github.com/redlock-go/redlock/redlock/internal/turn"
	"github.com/redlock-go/redlock/redlock/report"

	"github.com/redlock-go/redlock/internal/node"
)

// Shared holds of a name: a permit of a counting semaphore, and a read
// lock of a reader-writer lock. Both are leases taken by a plain count of
// the nodes that admitted the holder (no split-vote rule: a node that
// refuses names no single competitor to give way to), one at a time per
// value; they differ only in their per-node operations, their Observer's
// names and their quorum.

// sharing is one kind of shared hold of a name: its acquisition, and the
// operations of its lease.
type sharing interface {
	lease.Kind
	acquire(name, token string, cfg *engine.Settings) node.Op
	// refused is the quorum rule that applied to an attempt refused on n
	// nodes at quorum q (chosen: set by WithQuorum), and the error it
	// wraps, ErrNotAcquired in the primitive's words.
	refused(n, q int, chosen bool) (string, error)
	// held is what a refusal that left no quorum says of the lock ("":
	// held by others).
	held() string
	// kinds names, for the Observer, the wait, the single attempt, the
	// release and the extension.
	kinds() [4]report.OpKind
	// waits is the kind of its wait.
	waits() turn.Kind
}

// shared is one holder of shared holds of a name (a Semaphore value, or an
// RWMutex's read half).
type shared struct {
	h    lease.Holder
	kind sharing
}

// newShared returns the shared holds of name, counted against quorum q.
func newShared(e *engine.Engine, name string, cfg config, q int, kind sharing) shared {
	return shared{h: lease.Holder{Engine: e, Name: name, Settings: cfg.Settings, Report: reporter(cfg.observer, e.Pool.Nodes), Events: observe(cfg.events(), kind.kinds()), Quorum: q, Kind: kind}, kind: kind}
}

// errHeldHere and errInFlight are the failures of an attempt that the
// value's own state refused, without I/O (errHeldHere: held, by this value).
var (
	errHeldHere = &wordsError{"redlock: lock not acquired: this semaphore already holds a permit", ErrHeld}
	errInFlight = fmt.Errorf("%w: another acquisition of this semaphore is in flight", ErrNotAcquired)
)

// tryOnce is one observed attempt (TryAcquire, TryRLock).
func (s *shared) tryOnce(ctx context.Context) error {
	ctx, end := s.h.Observe(ctx, s.h.Call(lease.StepTry))
	_, err := s.try(ctx)
	return end(1, err)
}

// wait is an observed waiting acquisition (Acquire, RLock).
func (s *shared) wait(ctx context.Context) error {
	ctx, end := s.h.Observe(ctx, s.h.Call(lease.StepWait))
	if ctx == nil {
		return end(0, engine.Invalid("nil context"))
	}
	attempts, _, err := waitTurn(ctx, &turn.Waiting{Holder: &s.h, Kind: s.kind.waits()}, s.try)
	return end(attempts, err)
}

// try is one attempt; on failure it also describes it.
func (s *shared) try(ctx context.Context) (engine.Refusal, error) {
	if ctx == nil {
		return engine.Refusal{}, engine.Invalid("nil context")
	}
	if err := ctx.Err(); err != nil {
		return engine.Refusal{}, errors.Join(fmt.Errorf("%w: context done before the attempt", ErrNotAcquired), err)
	}
	if err := s.begin(); err != nil {
		return engine.Refusal{Local: true}, err
	}
	defer s.finish()
	token, err := newToken()
	if err != nil {
		return engine.Refusal{}, err
	}
	cfg := &s.h.Settings
	rule, notAcquired := s.kind.refused(s.h.Engine.Pool.Size(), s.h.Quorum, cfg.Quorum != 0)
	g, failed, err := s.h.Engine.Acquire(ctx, engine.Spec{Op: s.kind.acquire(s.h.Name, token, cfg), Undo: s.kind.Undo(s.h.Name, token),
		Token: token, Settings: cfg, Report: s.h.Report, Quorum: s.h.Quorum, NotAcquired: notAcquired, Rule: rule, Held: s.kind.held()})
	if err != nil {
		return failed, err
	}
	s.h.Take(ctx, token, token, g)
	return engine.Refusal{}, nil
}

// begin marks an acquisition in flight, unless the value holds a live
// lease or another acquisition is in flight.
func (s *shared) begin() error { return s.h.Begin(errInFlight, errHeldHere) }

// finish ends the acquisition begin marked.
func (s *shared) finish() { s.h.Finish() }

// release is an observed release (Release, RUnlock).
func (s *shared) release(ctx context.Context) error {
	ctx, end := s.h.Observe(ctx, s.h.Call(lease.StepRelease))
	if ctx == nil {
		return end(0, engine.Invalid("nil context"))
	}
	return end(0, s.h.Release(ctx, errReleased))
}

// errReleased is the error of a shared hold that its release ended.
var errReleased = fmt.Errorf("%w: released", ErrNotHeld)

// extend is an observed extension (Extend).
func (s *shared) extend(ctx context.Context) error {
	ctx, end := s.h.Observe(ctx, s.h.Call(lease.StepExtend))
	if ctx == nil {
		return end(0, engine.Invalid("nil context"))
	}
	return end(0, s.h.ExtendCurrent(ctx))
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

// holds are the lease operations of a shared hold of one node.Shape: a
// permit's and a read hold's differ in nothing else. Its release
// announces itself to the name's waiters; its undo announces nothing.
type holds node.Shape

func (s holds) Release(name string, l *lease.Lease) node.Op {
	return &node.Release{Shape: node.Shape(s), Key: name, Token: l.Token, Channel: node.ReleaseChannel(name), QueueKey: node.QueueKey(name)}
}

func (s holds) Undo(name, token string) node.Op {
	return &node.Release{Shape: node.Shape(s), Key: name, Token: token}
}

func (s holds) Extend(name, token string, cfg *engine.Settings) node.Op {
	return &node.Extend{Shape: node.Shape(s), Key: name, Token: token, TTL: cfg.TTL}
}

// permitsOf is a counting semaphore's sharing: one of n permits.
type permitsOf struct {
	holds
	n int
}

func newPermits(n int) permitsOf { return permitsOf{holds(node.Semaphore), n} }

func (p permitsOf) acquire(name, token string, cfg *engine.Settings) node.Op {
	return &node.Acquire{Shape: node.Semaphore, Key: name, Token: token, TTL: cfg.TTL, Permits: p.n, MinUptime: minUptime(cfg.Restart)}
}

func (permitsOf) waits() turn.Kind { return turn.Permit }

// The refusals of a permit and of a read lock, in their own words.
var (
	errPermitNotAcquired = &wordsError{"redlock: permit not acquired", ErrNotAcquired}
	errReadNotAcquired   = &wordsError{"redlock: read lock not acquired", ErrNotAcquired}
)

func (p permitsOf) refused(n, q int, chosen bool) (string, error) {
	if chosen {
		return fmt.Sprintf("quorum %d set by WithQuorum", q), errPermitNotAcquired
	}
	return fmt.Sprintf("a %d-permit semaphore on %d nodes needs %d of them (N·K/(K+1)+1, so that no K+1 holders "+
		"can each have a quorum; WithQuorum sets another)", p.n, n, q), errPermitNotAcquired
}

func (permitsOf) held() string { return "" }

func (permitsOf) kinds() [4]report.OpKind {
	return [4]report.OpKind{report.OpAcquire, report.OpTryAcquire, report.OpRelease, report.OpExtendPermit}
}

// reading is a reader-writer lock's read holds.
type reading struct{ holds }

func newReading() reading { return reading{holds(node.Read)} }

func (reading) acquire(name, token string, cfg *engine.Settings) node.Op {
	return &node.Acquire{Shape: node.Read, Key: name, Token: token, TTL: cfg.TTL, MinUptime: minUptime(cfg.Restart)}
}

func (reading) waits() turn.Kind { return turn.Reader }

func (reading) refused(int, int, bool) (string, error) {
	return "a read lock needs a majority", errReadNotAcquired
}

// held: a reader is refused by a writer (or a Mutex) that holds the name,
// or by a writer's waiting mark, which may stand while nothing holds it.
func (reading) held() string { return "held by a writer, or one waits" }

func (reading) kinds() [4]report.OpKind {
	return [4]report.OpKind{report.OpRLock, report.OpTryRLock, report.OpRUnlock, report.OpExtendRead}
}
