package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
)

// The causes a node's failure is reported with. The public packages export
// them under the same names (redlock.ErrMisconfigured, report.ErrNodeTimeout,
// ...); they are declared
// here, at the bottom of the stack, so that every layer can classify
// without reaching up.
var (
	ErrNodeTimeout    = errors.New("redlock: node timeout")
	ErrNodeDown       = errors.New("redlock: node down")
	ErrNodeRecovering = errors.New("redlock: node restarted less than the restart delay ago")
	ErrMisconfigured  = errors.New("redlock: node misconfigured")
	ErrNotReplicated  = errors.New("redlock: write not acknowledged by enough replicas")
)

// ErrUnsent is the error of a request that was never sent, so cannot have
// taken effect: its node timeout passed while it waited in the queue, the
// queue was full, or the node was closed.
var ErrUnsent = errors.New("redlock: request not sent")

// ErrQueueFull and ErrClosed are ErrUnsent for a request that found the
// queue full, or the node closed.
var (
	ErrQueueFull = fmt.Errorf("%w: the node's queue is full", ErrUnsent)
	ErrClosed    = fmt.Errorf("%w: the node is closed", ErrUnsent)
)

// Unsent reports whether err proves that the request cannot have taken
// effect: it was never sent, the node was skipped as down, the connection
// could not be dialled, the node refused it while recovering from a
// restart, or every transaction that carried it was aborted. Any other
// error leaves the outcome unknown, a node timeout too, even one whose
// cause is a failed dial: the client may still be dialling, and send it.
func Unsent(err error) bool {
	var opErr *net.OpError
	switch {
	case errors.Is(err, ErrNodeDown), errors.Is(err, ErrNodeRecovering), errors.Is(err, ErrAborted):
		return true
	case errors.Is(err, ErrNodeTimeout):
		return false
	}
	return errors.Is(err, ErrUnsent) || errors.As(err, &opErr) && opErr.Op == "dial"
}

// Unreachable reports whether err says the node could not be reached (a
// dial, read or write failure, a closed connection), as opposed to an
// answer from the node, or a request the library itself did not send.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, ErrUnsent) || errors.Is(err, ErrNodeRecovering) {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || tlsFailure(err) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errNoAnswer)
}

// Misconfigured reports whether err is a refusal that no retry can change
// (see ErrMisconfigured): an error reply about permissions,
// authentication, cluster slots, a key of the wrong type or an unknown
// command, or a failed TLS handshake.
func Misconfigured(err error) bool {
	if err == nil {
		return false
	}
	if tlsFailure(err) {
		return true
	}
	msg, ok := replyOf(err)
	if !ok {
		return false
	}
	for _, prefix := range []string{"NOPERM", "NOAUTH", "WRONGPASS", "CROSSSLOT", "WRONGTYPE", "ERR unknown command"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	// Redis 7.0 reports a script's refused command with a plain ERR.
	return strings.HasPrefix(msg, "ERR The user executing the script can't")
}

// AuthFailure reports whether err is the node refusing this client as a
// whole (NOAUTH, WRONGPASS: a missing or wrong password or user), not one
// command: no optional feature is refused by it (see Config.OnNoClock).
func AuthFailure(err error) bool {
	return says(err, "NOAUTH") || says(err, "WRONGPASS")
}

// Classify marks an error that no retry can change with ErrMisconfigured,
// keeping the node's own error in the chain.
func Classify(err error) error {
	if err != nil && Misconfigured(err) && !errors.Is(err, ErrMisconfigured) {
		return &misconfiguredError{err: err}
	}
	return err
}

// misconfiguredError is a node's error that wraps ErrMisconfigured.
type misconfiguredError struct{ err error }

func (e *misconfiguredError) Error() string        { return "misconfigured: " + e.err.Error() }
func (e *misconfiguredError) Unwrap() error        { return e.err }
func (e *misconfiguredError) Is(target error) bool { return target == ErrMisconfigured } //nolint:errorlint // a sentinel

// tlsFailure reports a TLS handshake that failed for a reason that stays:
// a certificate not trusted, expired or for another name, TLS spoken to a
// plain port, or an alert from the server (it refused the client's
// certificate).
func tlsFailure(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		header   tls.RecordHeaderError
		opErr    *net.OpError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &header) ||
		errors.As(err, &opErr) && opErr.Op == "remote error"
}

// errNoAnswer marks a client's own context error (see ClientErr).
var errNoAnswer = errors.New("redlock: no answer")

// ClientErr keeps a context error that a client returns (go-redis' own
// dial or pool timeout) out of the error chain, where it would pass for
// the caller's context ending. Whether the request was sent stays known.
func ClientErr(err error) error {
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	if Unsent(err) {
		return fmt.Errorf("%v: %w", err, ErrUnsent) //nolint:errorlint // on purpose: see above
	}
	return fmt.Errorf("%v: %w", err, errNoAnswer) //nolint:errorlint // on purpose: see above
}
