package node

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Transact implements Transacted. A plain lock's release is DELIFEQ key
// token or DELEX key IFEQ token where the server has one (Native), with its announcement to every
// waiter in the same round trip; otherwise the holder and the oldest
// queued waiter are read under WATCH of the key, then the key is deleted
// and the waiter unqueued in MULTI ... EXEC, and the release announced to
// that waiter's process after it. Multi-name and reader-writer releases
// need scripts.
func (o *Release) Transact(ctx context.Context, t *Tx) Reply {
	if err := WithoutScripts(o, nil); err != nil {
		return Reply{Err: err}
	}
	if rep, ok := transactNative(ctx, t, o, o.Key); ok {
		return rep
	}
	return o.watched(ctx, t)
}

// watched is the release as an optimistic transaction.
func (o *Release) watched(ctx context.Context, t *Tx) Reply {
	return t.Watch(ctx, o.Key, func(s *Step) (Reply, error) {
		kind := redis.NewStatusCmd(ctx, "type", o.Key)
		held, holds := holding(ctx, o.Key, o.Token, o.Reentrant)
		count := redis.NewCmd(ctx, "hget", o.Key, o.Token)
		queue, first := o.firstWaiter(ctx, t)
		reads := append([]redis.Cmder{kind, count}, holds...)
		if first != nil {
			reads = append(reads, first)
		}
		if err := s.Read(ctx, []string{o.Key}, reads...); err != nil {
			return Reply{}, err
		}
		switch {
		case kind.Val() == "none":
			return o.gone(ctx, s)
		case !held():
			return Reply{}, nil // another's, or another type
		}
		return o.free(ctx, s, queue, first, count)
	})
}

// free deletes the key (or drops a reentrant hold) in MULTI ... EXEC, and
// announces a release that frees the lock after it.
func (o *Release) free(ctx context.Context, s *Step, queue string, first *redis.StringSliceCmd, count *redis.Cmd) (Reply, error) {
	if o.Reentrant && o.Drop != DropAll {
		return o.drop(ctx, s, count)
	}
	writes := [][]any{{"del", o.Key}}
	waiter := ""
	if first != nil && o.Channel != "" {
		if w := first.Val(); len(w) > 0 {
			waiter = w[0]
			writes = append(writes, []any{"zrem", queue, waiter})
		}
	}
	var after []redis.Cmder
	var pub *redis.IntCmd
	if o.announces(first, waiter) {
		id := o.Token
		if o.Reentrant {
			id = o.Notice
		}
		pub = announcement(ctx, o.Key, o.Channel, id, waiter)
		after = append(after, pub)
	}
	if _, err := s.Exec(ctx, writes, after...); err != nil {
		return Reply{}, err
	}
	return Reply{OK: true, Value: heard(pub, waiter)}, nil
}

// announces reports whether the release is announced, first having read
// the oldest waiter of the queue (nil: not read), waiter: a plain release
// with no one queued announces nothing, as release_head.lua.
func (o *Release) announces(first *redis.StringSliceCmd, waiter string) bool {
	quiet := !o.Reentrant && first != nil && waiter == "" && first.Err() == nil
	return o.Channel != "" && !quiet
}

// named reports whether an announcement names waiter: one of a process
// ("process/waiter") that is not a reader ("process/r-..."), as
// announce.lua reads it.
func named(waiter string) bool { return Named(waiter) }

// drop drops one hold of a reentrant lock (DropOne: never the last), or
// the hold a failed attempt took (DropUndo: the key goes with the last).
func (o *Release) drop(ctx context.Context, s *Step, count *redis.Cmd) (Reply, error) {
	holds := int64(0)
	if c, ok := text(count.Val()); ok {
		holds = parseInt(c)
	}
	var writes [][]any
	switch {
	case o.Drop == DropUndo && holds <= 1:
		writes = [][]any{{"del", o.Key}}
	case holds > 1:
		writes = [][]any{{"hincrby", o.Key, o.Token, -1}}
	default:
		return Reply{OK: true}, nil // one hold left: dropping one never frees the lock
	}
	if _, err := s.Exec(ctx, writes); err != nil {
		return Reply{}, err
	}
	return Reply{OK: true}, nil
}

// firstWaiter returns the read of the oldest waiter in the name's queue,
// for a release that announces itself; nil when there is none to read.
func (o *Release) firstWaiter(ctx context.Context, t *Tx) (string, *redis.StringSliceCmd) {
	if o.Channel == "" || o.QueueKey == "" || o.Reentrant && o.Drop != DropAll {
		return "", nil
	}
	queue := t.layout.Beside(o.Key, o.QueueKey)
	if queue == "" {
		return "", nil
	}
	return queue, redis.NewStringSliceCmd(ctx, "zrange", queue, 0, 0)
}

// gone is a release's answer when the key was absent: the node's run id
// for a release that announces (see release.lua), so that the caller can
// tell its own resent release from a restart.
func (o *Release) gone(ctx context.Context, s *Step) (Reply, error) {
	last := o.Reentrant && o.Drop == DropAll || !o.Reentrant && o.Channel != ""
	if !last {
		return Reply{Value: Released{Gone: true}}, nil // an undo or one hold: no one reads whose server
	}
	info := redis.NewStringCmd(ctx, "info", "server")
	if err := s.Read(ctx, nil, info); err != nil {
		return Reply{}, err
	}
	id, _ := infoField(info.Result())("run_id") // a user without INFO: "", which matches no server
	return Reply{Value: Released{Gone: true, Server: id}}, nil
}

// announcement is the PUBLISH that tells waiters a lock is free (see
// announce.lua): to the named waiter's process on its own channel, or to
// every waiter on the lock's channel when no waiter is named.
func announcement(ctx context.Context, name, channel, id, waiter string) *redis.IntCmd {
	if process, _, ok := strings.Cut(waiter, "/"); ok && Named(waiter) {
		return redis.NewIntCmd(ctx, "publish", WakeChannel(process), id+"|"+waiter+"|"+name)
	}
	return redis.NewIntCmd(ctx, "publish", channel, id+"|")
}

// heard is what a release that announced itself with pub says: how many
// clients heard it, and whether it named a waiter. A PUBLISH the node
// refused (a user without the channel) reached no one.
func heard(pub *redis.IntCmd, waiter string) Released {
	if pub == nil {
		return Released{}
	}
	n, _ := pub.Result()
	return Released{Heard: int(n), Named: named(waiter)}
}

func parseInt(s string) int64 {
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
