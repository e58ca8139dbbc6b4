package nodetest

import (
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// What a name holds on the fake, across its stores (Data, Sems, Readers),
// as TYPE tells it to the scripts: a lock of one kind must see another's
// key as the scripts do, not as absent.

// The kinds of key, as the scripts tell them apart.
const (
	kindNone    = "none"
	kindString  = "string"  // a plain lock, a writer, a writer's mark
	kindHash    = "hash"    // a reentrant lock
	kindZset    = "zset"    // a semaphore
	kindReaders = "readers" // a reader-writer lock's readers (a hash too, with a marker)
)

// kind returns what key holds, its expired entries dropped. Called with
// n.mu held.
func (n *Fake) kind(key string) string {
	if e, ok := n.entry(key); ok {
		if e.Hash {
			return kindHash
		}
		return kindString
	}
	if n.liveSem(key) != nil {
		return kindZset
	}
	if n.liveReaders(key) != nil {
		return kindReaders
	}
	return kindNone
}

// entry returns key's lock (or mark) if it has not expired, and drops it
// if it has. Called with n.mu held.
func (n *Fake) entry(key string) (Entry, bool) {
	e, ok := n.Data[key]
	if ok && !time.Now().Before(e.Expires) {
		delete(n.Data, key)
		return Entry{}, false
	}
	return e, ok
}

// liveSem returns semaphore key with its expired permits dropped, nil
// when none is left (the sorted set expires with its last permit). Called
// with n.mu held.
func (n *Fake) liveSem(key string) *Sem {
	s := n.Sems[key]
	if s == nil {
		return nil
	}
	dropExpired(s.Holders)
	if len(s.Holders) == 0 {
		delete(n.Sems, key)
		return nil
	}
	return s
}

// liveReaders returns the live readers of key, nil when none is left (the
// hash expires with its last reader). Called with n.mu held.
func (n *Fake) liveReaders(key string) map[string]time.Time {
	rs := n.Readers[key]
	dropExpired(rs)
	if len(rs) == 0 {
		delete(n.Readers, key)
		return nil
	}
	return rs
}

// dropExpired drops the holds that expired from holds.
func dropExpired(holds map[string]time.Time) {
	for tok, exp := range holds {
		if !time.Now().Before(exp) {
			delete(holds, tok)
		}
	}
}

// notALock is the error reply of a lock's script (alien in stored.lua) on
// a key that holds what no lock leaves: here, a semaphore's.
func notALock(key, kind string) error {
	return wrongTypeError("WRONGTYPE fake: the key " + key + " holds a " + kind + ", not a lock")
}

// beside is where the fake keeps key, which lock name keeps beside its
// own, "" where its layout cannot or key is "" (see node.Layout.Beside).
func (n *Fake) beside(name, key string) string {
	return node.Layout{Sharded: n.Sharded}.Beside(name, key)
}
