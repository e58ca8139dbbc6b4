package node

import (
	"context"
	"slices"
)

// A reentrant lock's operations without scripts (see tx.go): optimistic
// transactions that answer as their scripts do.

// reentrantTry is a Reentrant lock's acquisition: the owner's field and
// the counter read under WATCH, then one more hold (or the first) and the
// TTL in MULTI ... EXEC.
func (o *Acquire) reentrantTry(ctx context.Context, t *Tx) func(s *Step) (Reply, error) {
	return func(s *Step) (Reply, error) {
		if rep, done, err := recovering(ctx, s, o.MinUptime); done || err != nil {
			return rep, err
		}
		keys := t.layout.keys(o.Key, o.FenceKey)
		kind := NewText("type", o.Key)
		holds := NewText("hget", o.Key, o.Token)
		pttl := NewInt("pttl", o.Key)
		owners := NewTexts("hkeys", o.Key) // a reply error when no hash
		reads := []*Cmd{kind, holds, pttl, owners}
		var ctr *Cmd
		if len(keys) > 1 {
			ctr = NewText("get", keys[1])
			reads = append(reads, ctr)
		}
		if err := s.Read(ctx, keys, reads...); err != nil {
			return Reply{}, err
		}
		var n uint64
		if ctr != nil {
			var err error
			if n, err = counterOf(ctr.Val(), o.FenceKey); err != nil {
				return Reply{Err: err}, nil
			}
		}
		writes, err := o.reentrantWrites(kind.Str(), holds.Val() != nil, pttl.Num())
		if err != nil || writes == nil {
			return Reply{Err: err, Value: Grant{Counter: n, Holder: owner(kind.Str(), owners.Strs())}}, nil
		}
		after := o.Ack.encode(nil)
		res, err := s.Exec(ctx, writes, refs(after)...)
		if err != nil {
			return Reply{}, err
		}
		if err := firstErr(res); err != nil {
			return Reply{Err: err}, nil
		}
		return o.Ack.check(after, Reply{OK: true, Value: Grant{Counter: n}}), nil
	}
}

// owner is the owner a reentrant lock's key of kind names with its
// fields: "" when it is no reentrant lock (a reader-writer lock's readers
// have none), or its fields were not read (a user without HKEYS).
func owner(kind string, fields []string) string {
	if kind != "hash" || len(fields) != 1 || fields[0] == readersField {
		return ""
	}
	return fields[0]
}

// reentrantWrites returns what a Reentrant acquisition writes when the
// key is of kind, with the owner's field (owned) and time to live pttl:
// nil when it is refused, with an error when the key is no lock.
func (o *Acquire) reentrantWrites(kind string, owned bool, pttl int64) ([][]any, error) {
	switch {
	case kind == "none" && o.Reenter:
		return nil, nil // released or lost meanwhile: never re-created
	case kind == "none":
		return [][]any{{"hset", o.Key, o.Token, 1}, {"pexpire", o.Key, o.TTL.Milliseconds()}}, nil
	case kind == "hash" && owned:
		return [][]any{{"hincrby", o.Key, o.Token, 1}, {"pexpire", o.Key, o.TTL.Milliseconds()}}, nil
	}
	return nil, alien(o.Key, kind, pttl)
}

// reentrant is a Reentrant lock's release without scripts: the owner's
// holds (and, for the last Unlock, the oldest queued waiter) read under
// WATCH of the key, then the holds dropped in MULTI ... EXEC, and a release
// that frees the lock announced after it, naming that waiter.
func (o *Release) reentrant(ctx context.Context, t *Tx) Reply {
	return t.Watch(ctx, o.Key, func(s *Step) (Reply, error) {
		kind := NewText("type", o.Key)
		count := NewText("hget", o.Key, o.Token)
		reads := []*Cmd{kind, count}
		var queue string
		var first *Cmd
		if o.Drop == DropAll {
			if queue, first = firstWaiter(ctx, t, o.Key, o.Channel, o.QueueKey); first != nil {
				reads = append(reads, first)
			}
		}
		if err := s.Read(ctx, []string{o.Key}, reads...); err != nil {
			return Reply{}, err
		}
		var own string
		if queue != "" && slices.Contains(first.Strs(), o.Queued) {
			own = o.Queued
		}
		switch {
		case kind.Str() == "none" || kind.Str() != "hash" || count.Val() == nil: // absent, or another's (or another type)
			return gone(ctx, s, o.Drop == DropAll, kind.Str() != "none")
		case o.Drop != DropAll:
			return o.drop(ctx, s, count)
		}
		waiter := oldest(first, o.Queued)
		var pub *Cmd
		if o.Channel != "" {
			pub = announcement(ctx, o.Key, o.Channel, o.Notice, waiter)
		}
		return free(ctx, s, o.Key, queue, waiter, own, pub)
	})
}

// drop drops one hold of a reentrant lock (DropOne: never the last), or
// the hold a failed attempt took (DropUndo: the key goes with the last).
func (o *Release) drop(ctx context.Context, s *Step, count *Cmd) (Reply, error) {
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
