package node

import (
	"fmt"
	"time"
)

// Ack makes a node confirm a write only once Replicas of its replicas have
// it: WAIT Replicas Timeout right after the operation, on the same
// connection (the same pipeline), so that it waits for that write. A write
// acknowledged by fewer within Timeout fails with ErrNotReplicated; the
// write itself stands on the node (the caller undoes it as it undoes any
// failed node's). The zero Ack asks for nothing and sends no WAIT.
type Ack struct {
	Replicas int
	Timeout  time.Duration
}

// encode appends the WAIT, if any.
func (a Ack) encode(cmds []Cmd) []Cmd {
	if a.Replicas <= 0 {
		return cmds
	}
	return append(cmds, Cmd{Args: []any{"wait", a.Replicas, a.Timeout.Milliseconds()}, Expect: ExpectInt})
}

// check turns rep, the reply of the operation before the WAIT in cmds,
// into a failure when the write it made was not acknowledged. A write
// that made nothing (a refusal) needs no acknowledgement.
func (a Ack) check(cmds []Cmd, rep Reply) Reply {
	if a.Replicas <= 0 || !rep.OK || rep.Err != nil || len(cmds) == 0 {
		return rep
	}
	n, err := cmds[len(cmds)-1].Int()
	if err == nil {
		err = a.Short(n)
	}
	if err != nil {
		return Reply{Err: err, Value: rep.Value}
	}
	return rep
}

// Short returns the error of a write that n replicas acknowledged: one
// wrapping ErrNotReplicated when they are fewer than asked, else nil.
func (a Ack) Short(n int64) error {
	if n < int64(a.Replicas) {
		return fmt.Errorf("%w: %d of %d replicas acknowledged within %v", ErrNotReplicated, n, a.Replicas, a.Timeout)
	}
	return nil
}

// ops returns cmds without the WAIT, if any: the operation's own commands.
func (a Ack) ops(cmds []Cmd) []Cmd {
	if a.Replicas <= 0 || len(cmds) == 0 {
		return cmds
	}
	return cmds[:len(cmds)-1]
}
