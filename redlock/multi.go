package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redlock-go/redlock/internal/node"
)

// NewMultiMutex returns a Mutex that holds every one of names or none: one
// lock over several resources. On each node one script takes all the
// names or none of them (and extends and releases them together), so no
// node ever keeps part of the lock. Two multi-name locks with names in
// common cannot deadlock, whatever the order of their names: neither ever
// holds some of its names on a node while it waits for the others there,
// and across nodes they settle as two contenders for one name do (see the
// package documentation on split votes). A plain Mutex on one of the names
// is refused while the multi-name lock holds it, and the other way round.
//
// The Mutex's methods behave as for one name: Lock, TryLock, Unlock,
// Extend, renewal, Done and Err. Its [Mutex.Name] is names[0], and
// [Mutex.Names] all of them. [Redlock.Inspect] and [Redlock.ForceUnlock]
// work on any one of the names; forcing one free leaves the lock lost at
// its next extension, as it would a plain Mutex.
//
// The names must be distinct and not empty, and when a node is a Redis
// Cluster they must share a hash slot: give them one hash tag
// ("{orders}:7", "{orders}:8"). A multi-name lock is neither reentrant
// ([WithReentrant]) nor fenced ([WithFencing]): each is refused with
// [ErrInvalidArgument], as is bad input. A Lock that waits on a
// multi-name lock tries again after each back-off ([WithRetryDelay]): it
// is neither queued with the names' waiters nor woken by their releases
// ([WithNotification] is off). Its own releases are announced on each
// name's channel, which wakes the waiters of every name.
// One name alone gives a plain Mutex.
func (r *Redlock) NewMultiMutex(names []string, opts ...Option) (*Mutex, error) {
	if err := checkNames(names); err != nil {
		return nil, err
	}
	m, err := r.NewMutex(names[0], opts...)
	if err != nil || len(names) == 1 {
		return m, err
	}
	switch {
	case m.h.cfg.reentrant:
		return nil, invalid("a multi-name lock cannot be reentrant")
	case m.h.cfg.fencing:
		return nil, invalid("a multi-name lock is not fenced: fence each resource with its own lock, or give the resources one name")
	case r.e.sharded && !node.SameSlot(names):
		return nil, invalid("lock names %s hash to different Redis Cluster slots, and a node takes all of them in one script: "+
			"give them one hash tag, such as %q and %q", quoteAll(names), "{"+names[0]+"}:a", "{"+names[0]+"}:b")
	}
	m.lock = &multiLock{also: append([]string(nil), names[1:]...)}
	m.h.kind = m.lock
	m.h.cfg.notify = false
	return m, nil
}

// DoMulti runs fn while holding every lock in names, as [Redlock.Do] does
// for one (see [Redlock.NewMultiMutex]).
func (r *Redlock) DoMulti(ctx context.Context, names []string, fn func(ctx context.Context) error, opts ...Option) error {
	if ctx == nil {
		return invalid("nil context")
	}
	if fn == nil {
		return invalid("nil function")
	}
	m, err := r.NewMultiMutex(names, append(opts, WithRenewal())...)
	if err != nil {
		return err
	}
	return r.do(ctx, m, fn)
}

// Names returns the names the Mutex holds: its name, and for a multi-name
// lock (see [Redlock.NewMultiMutex]) the others after it.
func (m *Mutex) Names() []string {
	if ml, ok := m.lock.(*multiLock); ok {
		return append([]string{m.h.name}, ml.also...)
	}
	return []string{m.h.name}
}

// checkNames refuses no names, an empty name and a name given twice.
func checkNames(names []string) error {
	if len(names) == 0 {
		return invalid("no lock names")
	}
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		if n == "" {
			return invalid("empty lock name at index %d", i)
		}
		if seen[n] {
			return invalid("lock name %q given twice", n)
		}
		seen[n] = true
	}
	return nil
}

// quoted is the Mutex's name, or names, quoted for an error message.
func (m *Mutex) quoted() string {
	if _, ok := m.lock.(*multiLock); !ok {
		return strconv.Quote(m.h.name)
	}
	return quoteAll(m.Names())
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return fmt.Sprintf("[%s]", strings.Join(q, " "))
}
