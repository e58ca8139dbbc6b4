package redlock

import (
	"errors"
	"fmt"

	"github.com/redlock-go/redlock/redlock/internal/quorum"
)

// The engine's errors. The facade exports each sentinel under its own
// name (errors.go), with its documentation; the engine builds the errors of
// failed operations, each node's failure in the facade's own error type,
// through the function it was handed (nodeErr).

var (
	errNotAcquiredSentinel = errors.New("redlock: lock not acquired")
	errNotHeldSentinel = errors.New("redlock: lock not held")
	errLockLostSentinel = errors.New("redlock: lock lost")
	errStaleFenceSentinel = errors.New("redlock: stale fencing token")
	errInvalidArgumentSentinel = errors.New("redlock: invalid argument")
	errClosedSentinel = errors.New("redlock: closed")
)

// invalid is an error wrapping ErrInvalidArgument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errInvalidArgumentSentinel}, args...)...)
}

// fail builds the error of an operation that failed: sentinel, the reason,
// the context's error when it ended, and one *NodeError per node that
// failed in round t.
func (e *engine) fail(sentinel error, reason string, ctxErr error, t *quorum.Tally) error {
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
