package nodetest

import (
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// A reader-writer lock's readers, as read_acquire.lua, read_extend.lua and
// read_release.lua answer them (see rw.lua). Its writer is an Acquire with
// Intent (grantWriter) and a Release with Intent (dropMark).

// readers is rw.lua's readers(): whether key is free (kindNone), held by
// readers (kindReaders) or by a lock (a writer, a Mutex: kindString), or
// the error a script gives for a semaphore's key. Called with n.mu held.
func (n *Fake) readers(key string) (string, error) {
	switch k := n.kind(key); k {
	case kindZset:
		return "", notALock(key, k)
	case kindString, kindHash:
		return kindString, nil
	default:
		return k, nil
	}
}

func (n *Fake) readAcquire(r *node.Acquire) node.Reply {
	waits := false
	ok, err := n.script("read acquire", r.Key, func() (bool, error) {
		if err := n.recovering(r.MinUptime); err != nil {
			return false, err
		}
		state, err := n.readers(r.Key)
		if err != nil || state == kindString {
			return false, err
		}
		_, again := n.Readers[r.Key][r.Token] // a resend re-arms its hold
		if _, marked := n.entry(n.beside(r.Key, node.IntentKey(r.Key))); marked && !again {
			waits = true // no new reader while a writer waits
			return false, nil
		}
		n.hold(r.Key, r.Token, r.TTL)
		return true, nil
	})
	switch {
	case err != nil:
		return node.Reply{Err: err}
	case ok:
		return node.Reply{OK: true}
	}
	return node.Reply{Value: node.ReadRefusal{WriterWaits: waits}}
}

// hold makes token a reader of key for ttl. Called with n.mu held.
func (n *Fake) hold(key, token string, ttl time.Duration) {
	if n.Readers[key] == nil {
		n.Readers[key] = map[string]time.Time{}
	}
	n.Readers[key][token] = time.Now().Add(ttl)
}

func (n *Fake) readExtend(r *node.Extend) (bool, error) {
	return n.script("read extend", r.Key, func() (bool, error) {
		state, err := n.readers(r.Key)
		if _, held := n.Readers[r.Key][r.Token]; err != nil || state != kindReaders || !held {
			return false, err
		}
		n.hold(r.Key, r.Token, r.TTL)
		return true, nil
	})
}

// readRelease drops a reader; the last one's release is announced.
func (n *Fake) readRelease(r *node.Release) node.Reply {
	heard, gone := 0, false
	ok, err := n.script("read release", r.Key, func() (bool, error) {
		state, err := n.readers(r.Key)
		if err != nil {
			return false, err
		}
		if _, held := n.Readers[r.Key][r.Token]; state != kindReaders || !held {
			// A lock's key (a writer's, a Mutex's) is taken, not gone.
			gone = state == kindNone || state == kindReaders
			return false, nil
		}
		delete(n.Readers[r.Key], r.Token)
		if n.liveReaders(r.Key) == nil && r.Channel != "" {
			heard = n.announce(r.Key, r.Channel, r.Token, n.popWaiter(n.beside(r.Key, r.QueueKey)))
		}
		return true, nil
	})
	if err != nil {
		return node.Reply{Err: err}
	}
	return n.released(ok, heard, gone, r.Channel != "" && !ok && !gone, r.Channel != "", nil)
}
