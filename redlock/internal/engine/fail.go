package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/quorum"
)

// The engine's errors. The facade exports each sentinel under its own
// name (redlock/errors.go), with its documentation; the engine builds the errors of
// failed operations, each node's failure in the facade's own error type,
// through the function it was handed (nodeErr).

// The sentinels, which the facade exports and documents (redlock/errors.go).
var (
	ErrNotAcquired     = errors.New("redlock: lock not acquired")
	ErrNotHeld         = errors.New("redlock: lock not held")
	ErrLockLost        = errors.New("redlock: lock lost")
	ErrStaleFence      = errors.New("redlock: stale fencing token")
	ErrInvalidArgument = errors.New("redlock: invalid argument")
	ErrClosed          = errors.New("redlock: closed")

	// The classes of a refused acquisition, each wrapping ErrNotAcquired
	// (see refusal).
	ErrHeld        = &classError{"held by another", ErrNotAcquired}
	ErrSplit       = &classError{"split: no one holds a quorum", ErrNotAcquired}
	ErrNodesFailed = &classError{"nodes failed", ErrNotAcquired}
)

// classError is a class of refusal: a sentinel that wraps ErrNotAcquired,
// so that a caller that only asks whether the acquisition failed still
// finds it.
type classError struct {
	phrase string
	err    error
}

func (e *classError) Error() string { return "redlock: lock not acquired: " + e.phrase }
func (e *classError) Unwrap() error { return e.err }

// refusal is the error of an acquisition refused as class (ErrHeld,
// ErrSplit or ErrNodesFailed) and said in words, the primitive's own
// ErrNotAcquired ("redlock: permit not acquired", or ErrNotAcquired
// itself): its message is the words, then the class's phrase (phrase
// when set), and errors.Is finds both.
type refusal struct {
	words  error
	class  *classError
	phrase string
}

func (e *refusal) Error() string { return e.words.Error() + ": " + cmp.Or(e.phrase, e.class.phrase) }

func (e *refusal) Unwrap() []error { return []error{e.words, e.class} }

// classOf returns the class err was refused as, with its phrase (nil, "":
// none).
func classOf(err error) (*classError, string) {
	var r *refusal
	if errors.As(err, &r) {
		return r.class, cmp.Or(r.phrase, r.class.phrase)
	}
	for _, c := range []*classError{ErrHeld, ErrSplit, ErrNodesFailed} {
		if errors.Is(err, c) {
			return c, c.phrase
		}
	}
	return nil, ""
}

// Classed reports whether err, a failed attempt's, says what refused it:
// ErrHeld, ErrSplit or ErrNodesFailed. It allocates nothing (every
// attempt of a wait asks it).
func Classed(err error) bool {
	return err != nil && (errors.Is(err, ErrHeld) || errors.Is(err, ErrSplit) || errors.Is(err, ErrNodesFailed))
}

// Told is what an earlier attempt of a wait said, as the wait's verdict
// once its last attempt could not tell (the wait ended while it was out):
// err is that earlier attempt's error, ago how long before the wait's end
// it returned. It wraps err whole (its class, and the node errors its
// count of failed nodes stands on) and names the attempt's age; nil when
// err has no class.
func Told(err error, ago time.Duration) error {
	c, phrase := classOf(err)
	if c == nil {
		return nil
	}
	return &told{err: err, phrase: phrase, ago: ago}
}

// told is Told's error.
type told struct {
	err    error
	phrase string
	ago    time.Duration
}

func (e *told) Error() string {
	return fmt.Sprintf("redlock: %s, as the last attempt that could tell found, %v before the wait ended (%v)",
		e.phrase, e.ago.Round(time.Microsecond), e.err)
}

func (e *told) Unwrap() error { return e.err }

// Invalid is an error wrapping ErrInvalidArgument.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// fail builds the error of an operation that failed: sentinel, the reason,
// the context's error when it ended, and one *NodeError per node that
// failed in round t.
func (e *Engine) fail(sentinel error, reason string, ctxErr error, t *quorum.Tally) error {
	errs := make([]error, 0, 2+len(t.Failures))
	errs = append(errs, fmt.Errorf("%w: %s", sentinel, reason))
	if ctxErr != nil {
		errs = append(errs, ctxErr)
	}
	for _, f := range t.Failures {
		errs = append(errs, e.nodeErr(f.Node, f.Err))
	}
	return errors.Join(errs...)
}

// unconfirmed is the error of a release that no quorum confirmed although
// too few nodes answered that the token was gone to say it was not held
// (the nodes that failed may hold it still), once the caller's ctx has
// ended: not ErrNotHeld, but the cancellation, ctx.Err() (and its cause
// when that says more), the reason and one *NodeError per failed node.
func (e *Engine) unconfirmed(ctx context.Context, reason string, t *quorum.Tally) error {
	errs := make([]error, 0, 2+len(t.Failures))
	errs = append(errs, fmt.Errorf("redlock: release not confirmed, the caller's context ended (%w): %s", ctx.Err(), reason))
	if cause := context.Cause(ctx); !errors.Is(ctx.Err(), cause) {
		errs = append(errs, cause)
	}
	for _, f := range t.Failures {
		errs = append(errs, e.nodeErr(f.Node, f.Err))
	}
	return errors.Join(errs...)
}
