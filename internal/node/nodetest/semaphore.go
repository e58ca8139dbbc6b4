package nodetest

import (
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// Sem is one semaphore on a fake node: its permit count and each holder's
// expiry, as sem_acquire.lua keeps them.
type Sem struct {
	Permits int
	Holders map[string]time.Time
}

// wrongTypeError is the error reply a script gives for a key of another type.
type wrongTypeError string

func (e wrongTypeError) Error() string { return string(e) }
func (wrongTypeError) RedisError()     {}

// Holders returns the tokens holding a live permit of semaphore key.
func (n *Fake) Holders(key string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	if s := n.Sems[key]; s != nil {
		for tok, exp := range s.Holders {
			if time.Now().Before(exp) {
				out = append(out, tok)
			}
		}
	}
	return out
}

// sem returns semaphore key with its expired permits dropped (nil when
// none), or the error a script gives when key holds a lock or readers.
// Called with n.mu held.
func (n *Fake) sem(key string) (*Sem, error) {
	if k := n.kind(key); k != kindNone && k != kindZset {
		return nil, wrongTypeError("WRONGTYPE fake: the key " + key + " holds a " + k + ", not a semaphore")
	}
	return n.liveSem(key), nil
}

func (n *Fake) semAcquire(r *node.Acquire) node.Reply {
	var held int
	var refusal error
	ok, err := n.apply("sem acquire", r.Key, func() bool {
		if refusal = n.recovering(r.MinUptime); refusal != nil {
			return false
		}
		s, err := n.sem(r.Key)
		switch {
		case err != nil:
			refusal = err
			return false
		case s == nil:
			s = &Sem{Permits: r.Permits, Holders: map[string]time.Time{}}
			n.Sems[r.Key] = s
		case s.Permits != r.Permits:
			refusal = fmt.Errorf("%w: fake: the semaphore has %d permits, this one %d", node.ErrMisconfigured, s.Permits, r.Permits)
			return false
		}
		_, resend := s.Holders[r.Token]
		if !resend && len(s.Holders) >= r.Permits {
			held = len(s.Holders)
			return false
		}
		s.Holders[r.Token] = time.Now().Add(r.TTL)
		return true
	})
	if err == nil && refusal != nil {
		return node.Reply{Err: refusal}
	}
	return node.Reply{OK: ok, Err: err, Value: node.SemGrant{Holders: held}}
}

func (n *Fake) semExtend(r *node.Extend) (bool, error) {
	return n.script("sem extend", r.Key, func() (bool, error) {
		s, err := n.sem(r.Key)
		if s == nil {
			return false, err
		}
		if _, held := s.Holders[r.Token]; !held {
			return false, nil
		}
		s.Holders[r.Token] = time.Now().Add(r.TTL)
		return true, nil
	})
}

// semRelease runs a release, applied twice when the fake resends.
func (n *Fake) semRelease(r *node.Release) node.Reply {
	return n.resent(func() node.Reply { return n.semReleaseOnce(r) })
}

func (n *Fake) semReleaseOnce(r *node.Release) node.Reply {
	heard, gone := 0, false
	ok, err := n.script("sem release", r.Key, func() (bool, error) {
		s, err := n.sem(r.Key)
		if s == nil {
			gone = err == nil
			return false, err
		}
		if _, held := s.Holders[r.Token]; !held {
			gone = true
			return false, nil
		}
		delete(s.Holders, r.Token)
		if r.Channel != "" {
			heard = n.announce(r.Key, r.Channel, r.Token, n.popWaiter(n.beside(r.Key, r.QueueKey)))
		}
		return true, nil
	})
	if err != nil {
		return node.Reply{Err: err}
	}
	return n.released(ok, heard, gone, false, r.Channel != "", nil)
}
