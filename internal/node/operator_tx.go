package node

import (
	"context"
	"time"
)

// The operations outside a lock's life, without scripts: the waiters'
// queue and who a node is were plain commands already; an operator's
// Inspect and forced Release of a lock read under MULTI and WATCH. A semaphore's or
// readers' key is read and forced only with scripts.

// Transact implements Transacted: the same commands, in one round trip.
func (o *Queue) Transact(ctx context.Context, t *Tx) Reply {
	return t.plain(ctx, o)
}

// plain sends op's own commands, which are no scripts, in one round trip.
func (t *Tx) plain(ctx context.Context, op Op) Reply {
	cmds := op.Encode(t.layout, nil)
	if len(cmds) == 0 {
		return op.Decode(nil)
	}
	t.via.Send(ctx, refs(cmds)...)
	return op.Decode(cmds)
}

// Transact implements Transacted: the key's type, time to live, value or
// owner, and the fencing counter, read in one MULTI ... EXEC.
func (o *Inspect) Transact(ctx context.Context, t *Tx) Reply {
	writes := [][]any{{"type", o.Key}, {"pttl", o.Key}, {"get", o.Key}, {"hgetall", o.Key}}
	fk := t.layout.Beside(o.Key, FenceKey(o.Key))
	if fk != "" {
		writes = append(writes, []any{"get", fk})
	}
	res, err := t.Multi(ctx, o.Key, writes)
	if err != nil {
		return Reply{Err: err}
	}
	kind, _ := res[0].(string)
	pttl, _ := res[1].(int64)
	st := KeyState{}
	if fk != "" {
		if st.Counter, err = counterOf(res[4], FenceKey(o.Key)); err != nil {
			return Reply{Err: err}
		}
	}
	if kind == "none" {
		return Reply{OK: true, Value: st}
	}
	if err := lockKey(o.Key, kind, pttl, "inspecting"); err != nil {
		return Reply{Err: err}
	}
	st.Held, st.TTL = true, time.Duration(pttl)*time.Millisecond
	if kind == "string" {
		st.Holder, _ = text(res[2])
		st.Holds = 1
		return Reply{OK: true, Value: st}
	}
	fields := pairs(res[3])
	if _, ok := fields[readersField]; ok {
		return Reply{Err: noScripts("inspecting a reader-writer lock's readers", nil)}
	}
	st.Reentrant = true
	for owner, holds := range fields {
		st.Holder, st.Holds = owner, int(parseInt(holds))
	}
	return Reply{OK: true, Value: st}
}

// readersField marks a reader-writer lock's readers' hash (see rw.lua).
const readersField = "redlock:readers"

// pairs reads HGETALL's reply inside EXEC: a map (RESP3) or a flat list
// of fields and values (RESP2).
func pairs(v any) map[string]string {
	out := map[string]string{}
	switch v := v.(type) {
	case map[any]any:
		for k, val := range v {
			ks, _ := text(k)
			vs, _ := text(val)
			out[ks] = vs
		}
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			ks, _ := text(v[i])
			vs, _ := text(v[i+1])
			out[ks] = vs
		}
	}
	return out
}

// forced is a release of Shape Any without scripts: the holder and the
// oldest waiter read under WATCH, the key deleted and the waiter unqueued
// in MULTI ... EXEC, the release announced after it.
func (o *Release) forced(ctx context.Context, t *Tx) Reply {
	return t.Watch(ctx, o.Key, func(s *Step) (Reply, error) {
		kind := NewText("type", o.Key)
		pttl := NewInt("pttl", o.Key)
		get := NewText("get", o.Key)
		all := NewCmd("hgetall", o.Key)
		reads := []*Cmd{kind, pttl, get, all}
		queue := t.layout.Beside(o.Key, QueueKey(o.Key))
		var first *Cmd
		if queue != "" {
			first = NewTexts("zrange", queue, 0, 0)
			reads = append(reads, first)
		}
		if err := s.Read(ctx, []string{o.Key}, reads...); err != nil {
			return Reply{}, err
		}
		k := kind.Str()
		if k == "none" {
			return Reply{}, nil
		}
		if err := lockKey(o.Key, k, pttl.Num(), "forcing"); err != nil {
			return Reply{Err: err}, nil
		}
		forced, id, err := o.forcedHolder(k, get.Val(), all.Val())
		if err != nil {
			return Reply{Err: err}, nil
		}
		writes := [][]any{{"del", o.Key}}
		waiter := ""
		if first != nil && len(first.Strs()) > 0 {
			waiter = first.Strs()[0]
			writes = append(writes, []any{"zrem", queue, waiter})
		}
		pub := announcement(ctx, o.Key, ReleaseChannel(o.Key), id, waiter)
		if _, err := s.Exec(ctx, writes, pub); err != nil {
			return Reply{}, err
		}
		forced.Released = heard(pub, waiter)
		return Reply{OK: true, Value: forced}, nil
	})
}

// forcedHolder reads whose lock of kind the key is, from its value (a
// plain lock) or its fields (a reentrant one), and the id its forced
// release is announced with.
func (o *Release) forcedHolder(kind string, value, fields any) (Forced, string, error) {
	if kind == "string" {
		holder, _ := text(value)
		return Forced{Holder: holder}, holder, nil
	}
	f := Forced{Reentrant: true}
	all := pairs(fields)
	if _, ok := all[readersField]; ok {
		return f, "", noScripts("forcing a reader-writer lock's readers", nil)
	}
	for owner := range all {
		f.Holder = owner
	}
	return f, o.Notice, nil
}

// lockKey returns nil when a key of kind and time to live pttl is a lock
// (a plain or a reentrant one) an operator may read or force without
// scripts; an error when it is no lock, or a semaphore (doing names what).
func lockKey(key, kind string, pttl int64, doing string) error {
	if kind == "zset" && pttl != -1 {
		return noScripts(doing+" a semaphore", nil)
	}
	return alien(key, kind, pttl)
}

// ensure the operations' ways stay declared.
var (
	_ Transacted = (*Acquire)(nil)
	_ Transacted = (*Fence)(nil)
	_ Transacted = (*Extend)(nil)
	_ Transacted = (*Release)(nil)
	_ Transacted = (*Queue)(nil)
	_ Transacted = (*Inspect)(nil)
)
