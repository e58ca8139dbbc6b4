package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/internal/lease"
	"github.com/redlock-go/redlock/redlock/report"

	"github.com/redlock-go/redlock/redlock/internal/quorum"
	"github.com/redlock-go/redlock/redlock/internal/turn"

	"github.com/google/uuid"

	"github.com/redlock-go/redlock/internal/node"
)

// The kinds of lock a Mutex can be: plain (fenced or not), reentrant,
// multi-name (see multi.go) and an RWMutex's write lock (see rwmutex.go).
// Each keeps its own state and builds its own node operations; the Mutex
// holds one of them and a holder.

// lockKind is what one kind of lock sends the nodes.
type lockKind interface {
	lease.Kind
	// tryLock is Mutex m's TryLock past its checks (see Mutex.tryLock).
	tryLock(ctx context.Context, m *Mutex, released string, reasks int) (engine.Refusal, error)
	// unlock drops what m's Unlock drops before the release, if anything,
	// and reports whether it did: the lock then stays held.
	unlock(ctx context.Context, m *Mutex) (bool, error)
	// waitAs is the kind of m's Lock wait for a lock of cfg: whether it
	// may take the lock handed over by a release (turn.HandedLock).
	waitAs(cfg *engine.Settings) turn.Kind
	// names are the names a lock of name holds, and quote them for an
	// error message.
	names(name string) []string
	quote(name string) string
	// acquire is the acquisition of name by token; reenter when the owner
	// of a reentrant lock already holds it.
	acquire(name, token string, cfg *engine.Settings, reenter bool) node.Op
	// fence is the operation that records fencing token n of a won
	// acquisition (see engine.Spec.Fence).
	fence(name, token string, cfg *engine.Settings) func(n uint64) node.Op
}

// lockBase is what every kind of lock shares.
type lockBase struct{}

// errHeldByMutex is the refusal of an attempt on a Mutex that holds the
// lock (and is not reentrant): held, by this very value. Asking the nodes
// would only hear that they hold its token.
var errHeldByMutex = &wordsError{"redlock: lock not acquired: held by this Mutex, no node was asked", ErrHeld}

// lockOps names a lock's calls for the Observer, whatever its kind.
var lockOps = [4]report.OpKind{report.OpLock, report.OpTryLock, report.OpUnlock, report.OpExtend}

// token returns the token of a new acquisition and the notice that
// announces its release (unique to the acquisition).
func (lockBase) token() (token, notice string, err error) {
	t, err := newToken()
	return t, t, err
}

func (b lockBase) tryLock(ctx context.Context, m *Mutex, released string, reasks int) (engine.Refusal, error) {
	if m.live() != nil {
		return engine.Refusal{Local: true}, errHeldByMutex
	}
	token, notice, err := b.token()
	if err != nil {
		return engine.Refusal{}, err
	}
	return m.tryWith(ctx, token, notice, released, reasks)
}

func (lockBase) unlock(context.Context, *Mutex) (bool, error) { return false, nil }

func (lockBase) waitAs(*engine.Settings) turn.Kind { return turn.Lock }

func (lockBase) names(name string) []string { return []string{name} }

func (lockBase) quote(name string) string { return strconv.Quote(name) }

func (lockBase) fence(name, token string, cfg *engine.Settings) func(uint64) node.Op {
	return func(n uint64) node.Op {
		return &node.Fence{Key: name, Token: token, FenceKey: node.FenceKey(name), Fence: n, Ack: cfg.Ack}
	}
}

func (lockBase) Undo(name, token string) node.Op {
	return &node.Release{Key: name, Token: token}
}

func (lockBase) Extend(name, token string, cfg *engine.Settings) node.Op {
	return &node.Extend{Key: name, Token: token, TTL: cfg.TTL, Ack: cfg.Ack}
}

// newAcquire is the acquisition of name by token with cfg's TTL, fencing,
// restart delay and replica acknowledgement.
func newAcquire(name, token string, cfg *engine.Settings) *node.Acquire {
	return &node.Acquire{Key: name, Token: token, TTL: cfg.TTL, FenceKey: fenceKey(name, cfg),
		MinUptime: minUptime(cfg.Restart), Ack: cfg.Ack}
}

// fenceKey is name's fencing counter when cfg fences, "" otherwise.
func fenceKey(name string, cfg *engine.Settings) string {
	if !cfg.Fencing {
		return ""
	}
	return node.FenceKey(name)
}

// announced is the release of lease l of name that announces itself to
// the name's waiters.
func announced(name string, l *lease.Lease) *node.Release {
	r := handingOver(name, l.Token, l.Queued)
	r.QueuedSince = l.QueuedSince
	return r
}

// handingOver is the release of token of name that hands the lock over to
// the name's next waiter and announces it, removing queued (the releaser's
// own member of the queues, "" for none) first.
func handingOver(name, token, queued string) *node.Release {
	return &node.Release{Key: name, Token: token, Channel: node.ReleaseChannel(name), QueueKey: node.QueueKey(name),
		Queued: queued}
}

// plainLock is a lock of one name, fenced or not.
type plainLock struct{ lockBase }

// waitAs implements lockKind: a plain lock's release hands it over to a
// waiter that listens for announcements, when its grant is the key alone
// (no fencing token, restart delay or replica acknowledgement to add), as
// a handoff's is (see turn/handoff.go).
func (plainLock) waitAs(cfg *engine.Settings) turn.Kind {
	if cfg.Listen && !cfg.Fencing && cfg.Restart == 0 && cfg.Ack.Replicas == 0 {
		return turn.HandedLock
	}
	return turn.Lock
}

func (plainLock) acquire(name, token string, cfg *engine.Settings, _ bool) node.Op {
	return newAcquire(name, token, cfg)
}

func (plainLock) Release(name string, l *lease.Lease) node.Op { return announced(name, l) }

// reentrantLock is a lock whose Mutex value is its owner (WithReentrant):
// each TryLock while the Mutex holds the lock takes one more hold on that
// acquisition. Every acquisition has a token of its own, as a plain lock's
// does: a hold that an acquisition left on a node (a release that did not
// reach it, an undo still on its way) is another's to the next
// acquisition, which neither re-arms it nor counts it, so that it ends
// with its TTL. The owner's goroutines take turns for a first
// acquisition: the second waits for the first, then takes one more hold
// on what it won.
type reentrantLock struct {
	lockBase
	turn chan struct{} // one acquisition of the owner at a time
}

func newReentrant() *reentrantLock { return &reentrantLock{turn: make(chan struct{}, 1)} }

// tryLock is m's TryLock: one more hold on m's live lease, or else a new
// acquisition, one of the owner's goroutines at a time.
func (re *reentrantLock) tryLock(ctx context.Context, m *Mutex, released string, reasks int) (engine.Refusal, error) {
	select {
	case re.turn <- struct{}{}:
	case <-ctx.Done():
		return engine.Refusal{}, errors.Join(fmt.Errorf("%w: context done while another goroutine of the owner tried", ErrNotAcquired), ctx.Err())
	}
	defer func() { <-re.turn }()
	if l := m.live(); l != nil {
		return engine.Refusal{}, re.reenter(ctx, m, l)
	}
	token, notice, err := re.token()
	if err != nil {
		return engine.Refusal{}, err
	}
	return m.tryWith(ctx, token, notice, released, reasks)
}

func (*reentrantLock) acquire(name, token string, cfg *engine.Settings, reenter bool) node.Op {
	return &node.Acquire{Shape: node.Reentrant, Key: name, Token: token, TTL: cfg.TTL, Reenter: reenter,
		FenceKey: fenceKey(name, cfg), MinUptime: minUptime(cfg.Restart), Ack: cfg.Ack}
}

func (*reentrantLock) fence(name, token string, cfg *engine.Settings) func(uint64) node.Op {
	return func(n uint64) node.Op {
		return &node.Fence{Key: name, Token: token, FenceKey: node.FenceKey(name), Fence: n, Reentrant: true, Ack: cfg.Ack}
	}
}

func (*reentrantLock) Release(name string, l *lease.Lease) node.Op {
	return &node.Release{Shape: node.Reentrant, Key: name, Token: l.Token, Drop: node.DropAll,
		Channel: node.ReleaseChannel(name), Notice: l.Notice, QueueKey: node.QueueKey(name), Queued: l.Queued}
}

func (*reentrantLock) Undo(name, token string) node.Op {
	return &node.Release{Shape: node.Reentrant, Key: name, Token: token, Drop: node.DropUndo}
}

func (*reentrantLock) Extend(name, token string, cfg *engine.Settings) node.Op {
	return &node.Extend{Shape: node.Reentrant, Key: name, Token: token, TTL: cfg.TTL, Ack: cfg.Ack}
}

// reenter takes one more hold on the lock that l holds. A release
// meanwhile must not be undone by this: each node applies the Mutex's
// requests in the order they were sent (one lane per name), so a re-lock
// never overtakes the first SET, where it would find no key and take no
// hold.
func (re *reentrantLock) reenter(ctx context.Context, m *Mutex, l *lease.Lease) error {
	s := m.spec(l.Token, true)
	s.Reasks = quorum.MaxReasks
	g, _, err := m.h.Engine.Acquire(ctx, s)
	if err != nil {
		return err
	}
	if !m.h.HoldAgain(l, g) {
		// Unlocked or lost meanwhile. Where the release came first the
		// re-lock found no key and created none; where it came after, it
		// dropped the extra hold with the rest.
		return fmt.Errorf("%w: unlocked or lost during the attempt", ErrNotAcquired)
	}
	return nil
}

// unlock drops one hold of the Mutex's live lease when it has more than
// one, and reports whether it did; the lock stays held.
func (re *reentrantLock) unlock(ctx context.Context, m *Mutex) (bool, error) {
	l := m.h.DropHold()
	if l == nil {
		return false, nil
	}
	op := &node.Release{Shape: node.Reentrant, Key: m.h.Name, Token: l.Token, Drop: node.DropOne}
	return true, m.h.Engine.Free(ctx, op, m.h.Name, false, engine.Lapse{Settings: &m.h.Settings, Report: m.h.Report})
}

// multiLock is a lock of several names, all or none (see NewMultiMutex).
type multiLock struct {
	lockBase
	also []string // the names after the first
}

func (ml *multiLock) names(name string) []string { return append([]string{name}, ml.also...) }

func (ml *multiLock) quote(name string) string { return quoteAll(ml.names(name)) }

func (ml *multiLock) acquire(name, token string, cfg *engine.Settings, _ bool) node.Op {
	return &node.Acquire{Shape: node.Multi, Key: name, Also: ml.also, Token: token, TTL: cfg.TTL,
		MinUptime: minUptime(cfg.Restart), Ack: cfg.Ack}
}

func (ml *multiLock) Release(name string, l *lease.Lease) node.Op {
	return &node.Release{Shape: node.Multi, Key: name, Also: ml.also, Token: l.Token, Channel: node.ReleaseChannel(name)}
}

func (ml *multiLock) Undo(name, token string) node.Op {
	return &node.Release{Shape: node.Multi, Key: name, Also: ml.also, Token: token}
}

func (ml *multiLock) Extend(name, token string, cfg *engine.Settings) node.Op {
	return &node.Extend{Shape: node.Multi, Key: name, Also: ml.also, Token: token, TTL: cfg.TTL, Ack: cfg.Ack}
}

// writeLock is an RWMutex's write lock: a lock that live readers refuse,
// and that marks itself waiting where they hold the name (see RWMutex).
type writeLock struct {
	lockBase
	once           sync.Once
	intent, writer string // where the waiting writer's mark is kept, and its value
}

// ids returns the mark's key and the writer's id, made at the first call.
func (w *writeLock) ids(name string) (intent, writer string) {
	w.once.Do(func() { w.intent, w.writer = node.IntentKey(name), uuid.NewString() })
	return w.intent, w.writer
}

func (w *writeLock) acquire(name, token string, cfg *engine.Settings, _ bool) node.Op {
	intent, writer := w.ids(name)
	return &node.Acquire{Shape: node.Write, Key: name, Token: token, TTL: cfg.TTL, Intent: intent, Writer: writer,
		IntentTTL: markTTL(cfg), FenceKey: fenceKey(name, cfg), MinUptime: minUptime(cfg.Restart), Ack: cfg.Ack}
}

func (w *writeLock) Release(name string, l *lease.Lease) node.Op {
	intent, writer := w.ids(name)
	return &node.Release{Shape: node.Write, Key: name, Token: l.Token, Channel: node.ReleaseChannel(name),
		QueueKey: node.QueueKey(name), Intent: intent, Writer: writer, Queued: l.Queued}
}

// giveUp drops the writer's waiting mark from every node where it is still
// this writer's, in the background: a Lock that gave up waits no more, and
// its mark would keep new readers out, with no writer to let in, until
// markTTL passed (the simulator's seed 120006: readers refused for 2 s by
// the marks of writers whose Locks had ended). It goes as a release of a
// token no node holds, which frees nothing and hands nothing over.
func (w *writeLock) giveUp(h *lease.Holder) {
	intent, writer := w.ids(h.Name)
	op := &node.Release{Shape: node.Write, Key: h.Name, Token: uuid.NewString(), Channel: node.ReleaseChannel(h.Name),
		QueueKey: node.QueueKey(h.Name), Intent: intent, Writer: writer}
	h.Engine.Behind(op, nil, h.Settings.NodeTimeout, markTTL(&h.Settings))
}

// markTTL is how long a waiting writer's mark lasts on a node (see
// RWMutex): the TTL, and never less than two of the longest waits between
// a writer's attempts and their node timeouts, so that it does not lapse
// while the writer still tries.
func markTTL(c *engine.Settings) time.Duration {
	return max(c.TTL, 2*(c.DelayMax+c.NodeTimeout)).Truncate(time.Millisecond)
}
