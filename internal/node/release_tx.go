package node

import (
	"context"
	"slices"
)

// Transact implements Transacted. A Plain lock's release is DELIFEQ key
// token or DELEX key IFEQ token where the server has one (Native), with
// its announcement to every waiter in the same round trip; otherwise the
// holder and the oldest queued waiter are read under WATCH of the key,
// then the key is deleted and the waiter unqueued in MULTI ... EXEC, and
// the release announced to that waiter's process after it. A Reentrant
// lock's and an operator's (Any) have transactions of their own; the other
// shapes have no way without scripts (see WithoutScripts).
func (o *Release) Transact(ctx context.Context, t *Tx) Reply {
	switch o.Shape {
	case Plain:
		if rep, ok := transactNative(ctx, t, o, o.Key); ok {
			return rep
		}
		return o.watched(ctx, t)
	case Reentrant:
		return o.reentrant(ctx, t)
	case Any:
		return o.forced(ctx, t)
	}
	return Reply{Err: WithoutScripts(o, nil)}
}

// watched is a Plain lock's release as an optimistic transaction.
func (o *Release) watched(ctx context.Context, t *Tx) Reply {
	return t.Watch(ctx, o.Key, func(s *Step) (Reply, error) {
		kind := NewText("type", o.Key)
		held, holds := holding(ctx, o.Key, o.Token, false)
		queue, first := firstWaiter(ctx, t, o.Key, o.Channel, o.QueueKey)
		reads := append([]*Cmd{kind}, holds...)
		if first != nil {
			reads = append(reads, first)
		}
		if err := s.Read(ctx, []string{o.Key}, reads...); err != nil {
			return Reply{}, err
		}
		switch {
		case kind.Str() == "none" || !held(): // absent, or another's (or another type)
			return gone(ctx, s, o.Channel != "", kind.Str() != "none")
		}
		waiter := oldest(first, o.Queued)
		var pub *Cmd
		// A release with no one queued announces nothing, as
		// release_head.lua.
		if quiet := first != nil && len(first.Strs()) == 0 && first.Err() == nil; o.Channel != "" && !quiet {
			pub = announcement(ctx, o.Key, o.Channel, o.Token, waiter)
		}
		var own string
		if queue != "" && slices.Contains(first.Strs(), o.Queued) {
			own = o.Queued
		}
		return free(ctx, s, o.Key, queue, waiter, own, pub)
	})
}

// free deletes key and unqueues waiter and own, the releaser's own member
// ("": none), in MULTI ... EXEC, and announces the release with pub (nil:
// not at all) after it.
func free(ctx context.Context, s *Step, key, queue, waiter, own string, pub *Cmd) (Reply, error) {
	writes := [][]any{{"del", key}}
	for _, m := range []string{waiter, own} {
		if m != "" {
			writes = append(writes, []any{"zrem", queue, m})
		}
	}
	var after []*Cmd
	if pub != nil {
		after = append(after, pub)
	}
	if _, err := s.Exec(ctx, writes, after...); err != nil {
		return Reply{}, err
	}
	return Reply{OK: true, Value: heard(pub, waiter)}, nil
}

// named reports whether an announcement names waiter: one of a process
// ("process/waiter") that is not a reader ("process/r-..."), as
// announce.lua reads it.
func named(waiter string) bool { return Named(waiter) }

// firstWaiter returns the read of the oldest waiter in the queue of the
// lock key, for a release that announces itself on channel; nil when
// there is none to read.
func firstWaiter(ctx context.Context, t *Tx, key, channel, queueKey string) (string, *Cmd) {
	if channel == "" || queueKey == "" {
		return "", nil
	}
	queue := t.layout.Beside(key, queueKey)
	if queue == "" {
		return "", nil
	}
	// Two: the releaser's own member may be the first (see
	// Release.Queued).
	return queue, NewTexts("zrange", queue, 0, 1)
}

// oldest is the oldest waiter that first read other than own, "" when
// none was read or queued.
func oldest(first *Cmd, own string) string {
	if first == nil {
		return ""
	}
	for _, w := range first.Strs() {
		if w != own {
			return w
		}
	}
	return ""
}

// gone is a release's answer when the key was absent, or, with taken,
// held another's token or a value of another kind: with the node's run id
// for the release that ends the lock (last, see release.lua and taken in
// stored.lua), so that the caller can tell its own resent release from a
// restart.
func gone(ctx context.Context, s *Step, last, taken bool) (Reply, error) {
	if !last {
		if taken {
			return Reply{}, nil
		}
		return Reply{Value: Released{Gone: true}}, nil // an undo or one hold: no one reads whose server
	}
	info := NewText("info", "server")
	if err := s.Read(ctx, nil, info); err != nil {
		return Reply{}, err
	}
	id, _ := infoField(info.Text())("run_id") // a user without INFO: "", which matches no server
	return Reply{Value: Released{Gone: !taken, Taken: taken, Server: id}}, nil
}

// announcement is the PUBLISH that tells waiters a lock is free (see
// announce.lua): to the named waiter's process on its own channel, or to
// every waiter on the lock's channel when no waiter is named.
func announcement(ctx context.Context, name, channel, id, waiter string) *Cmd {
	if process, ok := MemberProcess(waiter); ok && Named(waiter) {
		return NewInt("publish", WakeChannel(process), Notice{ID: id, Member: waiter, Name: name}.String())
	}
	return NewInt("publish", channel, Notice{ID: id}.String())
}

// heard is what a release that announced itself with pub says: how many
// clients heard it, and whether it named a waiter. A PUBLISH the node
// refused (a user without the channel) reached no one.
func heard(pub *Cmd, waiter string) Released {
	if pub == nil {
		return Released{}
	}
	n, _ := pub.Int()
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
