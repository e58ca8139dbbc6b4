package node

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
)

// Release deletes Key if it holds Token as a plain lock. A release that
// frees the lock announces it on Channel ("" announces nothing), handing
// the lock over to the oldest waiter of QueueKey when it takes it so (see
// release.lua), else naming it. A node answers OK when Key held Token. Its
// Value is a Released when the node said more.
type Release struct {
	Key, Token        string
	Channel, QueueKey string
	// Queued is the releaser's own member of the queue, left by the wait
	// that took the lock ("" for none): the release removes it before it
	// picks the waiter to hand over to or name, since the wait's own
	// removal goes in the background and may not have reached the node.
	Queued string
	enc    encoding
	// nenc keeps DELIFEQ's arguments and DELEX's, pub the
	// announcement's (see native.go).
	nenc, pub encoding
}

// Released is what a release's reply says beyond OK. Heard is, for a
// release that freed the lock and announced it, how many clients the
// announcement reached; Named is set when it named a queued waiter, whose
// process alone heard it. Gone is set when the key was absent: it expired,
// an earlier try of the same release (resent by the client after its reply
// was lost) deleted it, or the node lost it (a restart, a failover); Taken
// when it held another's token or a value of another kind: taken from the
// caller, or taken after that earlier try freed it. Server is then the run
// id of the server that answered ("" when it did not say).
type Released struct {
	Heard  int
	Named  bool
	Gone   bool
	Taken  bool
	Server string
}

// ReleasedOf returns what rep, a release's reply, says beyond OK.
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
	args := o.enc.args(l, func() []any {
		var kb [2]string // on the stack: evalArgs copies the keys
		keys := releaseKeys(kb[:0], l, o.Key, o.Channel, o.QueueKey, "")
		if o.Queued != "" && len(keys) > 1 {
			return evalArgs(scripts.Release, keys, o.Token, o.Channel, "", o.Queued)
		}
		return evalArgs(scripts.Release, keys, o.Token, o.Channel)
	})
	return append(cmds, shared(ctx, args))
}

// releaseKeys appends to keys release.lua's keys for layout l: the lock
// key, then its queue when the release announces itself on channel and the
// queue can be kept beside the key, then mark (a writer's, "" for none)
// only when the queue is there.
func releaseKeys(keys []string, l Layout, key, channel, queueKey, mark string) []string {
	keys = append(keys, key)
	if q := l.Beside(key, queueKey); channel != "" && q != "" {
		keys = append(keys, q)
		if mark != "" {
			keys = append(keys, mark)
		}
	}
	return keys
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
		if id, ok := strings.CutPrefix(id, "taken:"); ok {
			return Reply{Value: Released{Taken: true, Server: id}} // another's: the node's run id
		}
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
// cannot drop more than it should.
func (*Release) Owable(err error) bool { return owable(err) }

// owable reports whether an operation that failed with err may not have
// reached the node, and is worth sending again later.
func owable(err error) bool {
	return err != nil && (Unsent(err) || Unreachable(err)) && !errors.Is(err, ErrClosed)
}
