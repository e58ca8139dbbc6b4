package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

// replyError is an error reply from a server, as go-redis returns it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func TestMisconfiguredClassification(t *testing.T) {
	for _, err := range []error{
		replyError("NOPERM this user has no permissions to access one of the keys used as arguments"),
		replyError("NOAUTH Authentication required."),
		replyError("WRONGPASS invalid username-password pair or user is disabled."),
		replyError("CROSSSLOT Keys in request don't hash to the same slot"),
		replyError("WRONGTYPE redlock: the key k holds a list, not a lock: another program uses this name"),
		replyError("ERR unknown command 'evalsha', with args beginning with: "),
		replyError("ERR The user executing the script can't publish to the channel mentioned in the command"),
		&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}},
		fmt.Errorf("dial: %w", x509.HostnameError{Host: "127.0.0.1", Certificate: &x509.Certificate{}}),
		tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"},
		&net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")},
	} {
		assert.True(t, Misconfigured(err), "%v", err)
		assert.ErrorIs(t, Classify(err), ErrMisconfigured, "%v", err)
		assert.ErrorIs(t, Classify(err), err, "the node's own error stays in the chain")
	}
	for _, err := range []error{
		nil,
		replyError("LOADING Redis is loading the dataset in memory"),
		replyError("READONLY You can't write against a read only replica."),
		replyError("OOM command not allowed when used memory > 'maxmemory'."),
		replyError("BUSY Redis is busy running a script."),
		&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED},
		ErrNodeTimeout,
	} {
		assert.False(t, Misconfigured(err), "%v: transient", err)
	}
}

func TestUnsent(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	read := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	assert.True(t, Unsent(dial))
	assert.True(t, Unsent(fmt.Errorf("pool: %w", dial)))
	assert.False(t, Unsent(read), "a read error may follow an applied write")
	assert.False(t, Unsent(ErrNodeTimeout))
	assert.False(t, Unsent(errBoom))
	// The client may still be dialling when the node timeout passes, and
	// send the request once a dial succeeds.
	timeout := fmt.Errorf("%w (last dial 90ms ago: %w)", ErrNodeTimeout, dial)
	assert.False(t, Unsent(timeout), "a timeout whose cause is a failed dial")
	assert.True(t, Unsent(fmt.Errorf("%w for 5ms (%w)", ErrNodeDown, timeout)), "a node skipped as down, whatever its cause")
}

func TestNodeErrorNeverPassesForCallersDeadline(t *testing.T) {
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}
	err := ClientErr(fmt.Errorf("pool: %w", dialTimeout))
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, Unsent(err), "a failed dial still counts as never sent")
	assert.Contains(t, err.Error(), "dial")
	err = ClientErr(fmt.Errorf("read: %w", context.DeadlineExceeded))
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, Unsent(err), "a read may follow an applied write")
	assert.True(t, Unreachable(err))
	assert.NoError(t, ClientErr(nil))
	assert.Equal(t, errBoom, ClientErr(errBoom))
}
