package node

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

var (
	errBoom      = errors.New("boom: an error reply")
	errRefused   = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	errLostReply = errors.New("reply lost")
)

func TestOwable(t *testing.T) {
	netLost := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	plain := &Release{Key: "k", Token: "t"}
	for _, c := range []struct {
		req  interface{ Owable(error) bool }
		err  error
		want bool
	}{
		{plain, nil, false},
		{plain, errBoom, false},      // the node answered: resending changes nothing
		{plain, errLostReply, false}, // not known to be a network failure
		{plain, fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{plain, netLost, true},
		{plain, errRefused, true},
		{plain, fmt.Errorf("%w: x", ErrNodeDown), true},
		{plain, ErrQueueFull, true},
		{plain, ErrClosed, false},
		{&Release{Shape: Reentrant, Drop: DropAll}, netLost, true},
		{&Release{Shape: Reentrant, Drop: DropOne}, errRefused, false},
		{&Release{Shape: Reentrant, Drop: DropUndo}, netLost, false}, // may drop a second hold
		{&Release{Shape: Reentrant, Drop: DropUndo}, errRefused, true},
	} {
		assert.Equal(t, c.want, c.req.Owable(c.err), "%+v %v", c.req, c.err)
	}
}
