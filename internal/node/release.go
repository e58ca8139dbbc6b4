package node

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
)

// Release deletes Key if it holds Token (a reentrant lock drops one hold,
// all of them, or the hold of a failed attempt, see Drop). A node answers
// OK when Key held Token. Its Value is a Released when the node said more.
type Release struct {
	Key, Token string
	Reentrant  bool
	Drop       Drop
	// Channel is where a release that frees the lock announces it, so that
	// waiters try again at once; "" announces nothing. Notice is the
	// payload, unique to the release (a reentrant token repeats). The
	// announcement also names the oldest waiter of QueueKey, popped from
	// it.
	Channel, Notice, QueueKey string
	// Also are the other names of a multi-name lock, released with Key
	// where they hold Token; each release is announced on its name's
	// channel (when Channel is not ""), and no waiter is named.
	Also []string
	// Intent and Writer, for the write lock of a reader-writer lock, are
	// where its writer's waiting mark is kept and the writer's id: the
	// release drops the mark if it is still this writer's (see
	// Acquire.Intent).
	Intent, Writer string
	enc            encoding
	// nenc keeps DELIFEQ's arguments and DELEX's, pub the
	// announcement's (see native.go).
	nenc, pub encoding
}

// Drop says what a reentrant release drops.
type Drop uint8

// What a reentrant release drops.
const (
	DropOne  Drop = iota // one hold; never frees the lock
	DropAll              // every hold: the owner's last Unlock
	DropUndo             // the hold a failed attempt took; frees the lock when none is left
)

// Released is what a Release's reply says beyond OK. Heard is, for a
// release that freed the lock and announced it, how many clients the
// announcement reached; Named is set when it named a queued waiter, whose
// process alone heard it. Gone is set when the key was absent: it expired,
// an earlier try of the same release (resent by the client after its reply
// was lost) deleted it, or the node lost it (a restart, a failover);
// Server is then the run id of the server that answered ("" when it did
// not say).
type Released struct {
	Heard  int
	Named  bool
	Gone   bool
	Server string
}

// ReleasedOf returns what rep, a Release's reply, says beyond OK.
func ReleasedOf(rep Reply) Released {
	r, _ := rep.Value.(Released)
	return r
}

// Name implements Op.
func (*Release) Name() string { return "release" }

// Lane implements Laned: the lock's name.
func (o *Release) Lane() string { return o.Key }

// Encode implements Op.
func (o *Release) Encode(ctx context.Context, l Layout, cmds []redis.Cmder) []redis.Cmder {
	if len(o.Also) > 0 {
		return append(cmds, o.encodeMulti(ctx))
	}
	args := o.enc.args(l, func() []any {
		var kb [3]string // on the stack: evalArgs copies the keys
		keys := append(kb[:0], o.Key)
		if q := l.Beside(o.Key, o.QueueKey); o.Channel != "" && q != "" {
			keys = append(keys, q)
		}
		if o.Intent != "" && len(keys) == 2 && !o.Reentrant {
			return evalArgs(scripts.Release, append(keys, l.Beside(o.Key, o.Intent)), o.Token, o.Channel, o.Writer)
		}
		if o.Reentrant {
			return evalArgs(scripts.ReleaseReentrant, keys, o.Token, strconv.Itoa(int(o.Drop)), o.Channel, o.Notice)
		}
		return evalArgs(scripts.Release, keys, o.Token, o.Channel)
	})
	return append(cmds, shared(ctx, args))
}

// Decode implements Op.
func (*Release) Decode(cmds []redis.Cmder) Reply { return decodeRelease(cmds) }

// decodeRelease reads the reply of release.lua and of the scripts that
// answer as it does.
func decodeRelease(cmds []redis.Cmder) Reply {
	cmd := cmds[0].(*redis.Cmd)
	if err := cmd.Err(); err != nil {
		return Reply{Err: err}
	}
	if id, ok := cmd.Val().(string); ok {
		return Reply{Value: Released{Gone: true, Server: id}} // the key was absent: the node's run id
	}
	v, err := cmd.Int64()
	switch {
	case err != nil:
		return Reply{Err: err}
	case v > 1: // 1 + 2 × the clients the announcement reached, + 1 if it named a waiter
		return Reply{OK: true, Value: Released{Heard: int(v-1) / 2, Named: (v-1)%2 == 1}}
	case v == 0:
		return Reply{Value: Released{Gone: true}}
	}
	return Reply{OK: v == 1}
}

// Owable reports whether a release that failed with err should be
// delivered later: it may not have reached the node, and sending it again
// cannot drop more than it should. Dropping one hold of a reentrant lock
// never frees it, so it is not worth owing; the undo of a reentrant hold
// is resent only when it surely was not applied.
func (o *Release) Owable(err error) bool {
	if err == nil || !Unsent(err) && !Unreachable(err) || errors.Is(err, ErrClosed) {
		return false
	}
	if o.Reentrant && o.Drop == DropOne {
		return false
	}
	return !o.Reentrant || o.Drop == DropAll || Unsent(err)
}
