package nodetest

import (
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// A lock's operations, as acquire_plain.lua, acquire.lua,
// acquire_reentrant.lua, write_acquire.lua, fence.lua, extend*.lua and
// release*.lua answer them.

func (n *Fake) acquire(r *node.Acquire) node.Reply {
	var counter uint64
	var holder string
	var refusal error
	ok, err := n.apply("acquire", r.Key, func() bool {
		if refusal = n.recovering(r.MinUptime); refusal != nil {
			return false
		}
		if r.FenceKey != "" {
			counter = n.Counters[r.FenceKey]
		}
		var granted bool
		granted, holder, refusal = n.grant(r)
		return granted
	})
	if err == nil && refusal != nil {
		return node.Reply{Err: refusal}
	}
	rep := node.Reply{OK: ok, Err: err}
	if holder != "" || counter != 0 {
		rep.Value = node.Grant{Holder: holder, Counter: counter}
	}
	return rep
}

// recovering is a node's refusal while it has been up less than least
// seconds (recovering in guard.lua), nil otherwise or when least is 0.
// Called with n.mu held.
func (n *Fake) recovering(least int64) error {
	if least > 0 && time.Since(n.UpSince) < time.Duration(least)*time.Second {
		return fmt.Errorf("%w: fake", node.ErrNodeRecovering)
	}
	return nil
}

// grant applies an acquisition as the acquire scripts do, and says whether
// it was granted, else who holds the key where the script names it, or
// the script's error reply. The kind of lock picks the script as
// node.Acquire.Encode does. Called with n.mu held.
func (n *Fake) grant(r *node.Acquire) (bool, string, error) {
	switch {
	case r.Reentrant:
		return n.grantReentrant(r)
	case len(r.Also) > 0:
		return n.grantAll(r)
	case r.Intent != "":
		return n.grantWriter(r)
	}
	return n.grantPlain(r)
}

// grantPlain is acquire_plain.lua and acquire.lua (and held() in
// stored.lua): SET NX, naming the holder of a plain lock.
func (n *Fake) grantPlain(r *node.Acquire) (bool, string, error) {
	switch k := n.kind(r.Key); k {
	case kindNone:
		n.Data[r.Key] = Entry{Value: r.Token, Expires: time.Now().Add(r.TTL), Holds: 1}
		return true, "", nil
	case kindString:
		e := n.Data[r.Key]
		if e.Value != r.Token {
			return false, e.Value, nil // SET NX GET names the holder
		}
		if r.FenceKey == "" && r.MinUptime == 0 {
			// acquire_plain.lua re-arms the TTL of a key that holds the
			// token already: a retried request, or a lock handed over.
			e.Expires = time.Now().Add(r.TTL)
			n.Data[r.Key] = e
		}
		return true, "", nil // a retried SET NX GET that had been applied
	case kindZset:
		return false, "", notALock(r.Key, k)
	}
	return false, "", nil // a reentrant lock or readers: held, by no one token
}

// grantReentrant is acquire_reentrant.lua.
func (n *Fake) grantReentrant(r *node.Acquire) (bool, string, error) {
	switch k := n.kind(r.Key); k {
	case kindNone:
		if r.Reenter {
			return false, "", nil // one more hold of a lock released meanwhile: never created
		}
		n.Data[r.Key] = Entry{Value: r.Token, Expires: time.Now().Add(r.TTL), Hash: true, Holds: 1}
		return true, "", nil
	case kindHash:
		e := n.Data[r.Key]
		if e.Value != r.Token {
			return false, "", nil
		}
		e.Holds++
		e.Expires = time.Now().Add(r.TTL)
		n.Data[r.Key] = e
		return true, "", nil
	case kindZset:
		return false, "", notALock(r.Key, k)
	}
	return false, "", nil // a plain lock or readers
}

// grantWriter is write_acquire.lua: live readers refuse a reader-writer
// lock's writer, which marks itself waiting at its Intent unless another
// writer's mark is there; a free name is the writer's, and its own mark
// goes. A held name answers as acquire.lua does.
func (n *Fake) grantWriter(r *node.Acquire) (bool, string, error) {
	mark := n.beside(r.Key, r.Intent)
	switch n.kind(r.Key) {
	case kindNone:
		n.Data[r.Key] = Entry{Value: r.Token, Expires: time.Now().Add(r.TTL), Holds: 1}
		if e, ok := n.entry(mark); ok && e.Value == r.Writer {
			delete(n.Data, mark)
		}
		return true, "", nil
	case kindReaders:
		if e, ok := n.entry(mark); mark != "" && (!ok || e.Value == r.Writer) {
			n.Data[mark] = Entry{Value: r.Writer, Expires: time.Now().Add(r.IntentTTL), Holds: 1}
		}
		return false, "", nil
	}
	return n.grantPlain(r)
}

func (n *Fake) fence(r *node.Fence) (bool, error) {
	return n.apply("fence", r.Key, func() bool {
		n.Counters[r.FenceKey] = max(n.Counters[r.FenceKey], r.Fence)
		e, ok := n.entry(r.Key)
		return ok && e.Value == r.Token && e.Hash == r.Reentrant
	})
}

// extend is extend.lua, extend_reentrant.lua and extend_multi.lua: every
// name must hold the token, or none is extended.
func (n *Fake) extend(r *node.Extend) (bool, error) {
	return n.apply("extend", r.Key, func() bool {
		keys := []string{r.Key}
		if !r.Reentrant {
			keys = append(keys, r.Also...)
		}
		for _, k := range keys {
			if e, ok := n.entry(k); !ok || e.Value != r.Token || e.Hash != r.Reentrant {
				return false
			}
		}
		for _, k := range keys {
			e := n.Data[k]
			e.Expires = time.Now().Add(r.TTL)
			n.Data[k] = e
		}
		return true
	})
}

// release runs a release, applied twice when the fake resends.
func (n *Fake) release(r *node.Release) node.Reply {
	return n.resent(func() node.Reply { return n.released(n.releaseHeard(r)) })
}

// resent runs release, twice when the fake resends (as a client retry
// after a lost reply does): the second reply comes back.
func (n *Fake) resent(release func() node.Reply) node.Reply {
	n.mu.Lock()
	resend := n.Resend
	n.mu.Unlock()
	if resend {
		_ = release()
	}
	return release()
}

// released is the reply of a release script: gone when the key (the
// permit, the reader) was absent, with the run id of the server that
// answered; otherwise heard, what its announcement returned (see
// announce).
func (n *Fake) released(ok bool, heard int, gone bool, err error) node.Reply {
	rep := node.Reply{OK: ok, Err: err}
	switch {
	case gone:
		n.mu.Lock()
		server := n.identify()[0] // the release script says which server answered
		n.mu.Unlock()
		rep.Value = node.Released{Gone: true, Server: server}
	case heard > 0:
		rep.Value = node.Released{Heard: heard / 2, Named: heard%2 == 1}
	}
	return rep
}

// releaseHeard runs a release, and says what its announcement returned
// (see announce), and whether the key was gone.
func (n *Fake) releaseHeard(r *node.Release) (bool, int, bool, error) {
	heard, gone := 0, false
	ok, err := n.apply("release", r.Key, func() bool {
		var ok bool
		if len(r.Also) > 0 {
			ok, heard, gone = n.releaseAll(r)
			return ok
		}
		n.dropMark(r)
		ok, heard, gone = n.releaseOne(r)
		return ok
	})
	return ok, heard, gone && err == nil, err
}

// releaseOne is release.lua and release_reentrant.lua. Called with n.mu
// held.
func (n *Fake) releaseOne(r *node.Release) (ok bool, heard int, gone bool) {
	e, held := n.entry(r.Key)
	if !held {
		return false, 0, n.notHeld(r)
	}
	if e.Value != r.Token || e.Hash != r.Reentrant {
		return false, 0, false
	}
	if r.Reentrant && r.Drop == node.DropUndo && e.Holds > 1 {
		e.Holds-- // an undo deletes the key with its last hold
		n.Data[r.Key] = e
		return true, 0, false
	}
	if r.Reentrant && r.Drop == node.DropOne {
		e.Holds = max(1, e.Holds-1) // dropping one hold never frees the lock
		n.Data[r.Key] = e
		return true, 0, false
	}
	delete(n.Data, r.Key)
	if r.Channel != "" {
		heard = n.announceRelease(r)
	}
	return true, heard, false
}

// announceRelease announces the release r that freed the lock, handing it over
// to the oldest waiter when r is a plain lock's release (two keys in
// release.lua), and returns what the announcement returned. Called with
// n.mu held.
func (n *Fake) announceRelease(r *node.Release) int {
	payload := r.Token
	if r.Reentrant {
		payload = r.Notice
	}
	queue := n.beside(r.Key, r.QueueKey)
	plain := !r.Reentrant && r.Intent == "" && queue != ""
	if plain && len(n.Queues[queue]) == 0 {
		return 0 // no one queued: a compare-and-delete (release_head.lua)
	}
	waiter, heard := n.popWaiter(queue), 0
	if plain {
		heard = n.handOver(r.Key, payload, waiter)
	}
	if heard == 0 {
		heard = n.announce(r.Key, r.Channel, payload, waiter)
	}
	return heard
}

// notHeld is a release of a key that holds no lock: it reports whether
// the key is absent, which a plain lock's release hands over (see
// handOverFree); otherwise a semaphore's or the readers' key is there.
// Called with n.mu held.
func (n *Fake) notHeld(r *node.Release) bool {
	free := n.kind(r.Key) == kindNone
	if free && r.Channel != "" && !r.Reentrant && r.Intent == "" {
		n.handOverFree(r)
	}
	return free
}

// handOverFree is release.lua's plain release of a key that is absent:
// the oldest waiter gets it handed over when it takes it so. Called with
// n.mu held.
func (n *Fake) handOverFree(r *node.Release) {
	queue := n.beside(r.Key, r.QueueKey)
	if queue == "" {
		return
	}
	if head := n.headWaiter(queue); head != "" && n.taker(head) {
		n.handOver(r.Key, r.Token, n.popWaiter(queue))
	}
}

// taker is taker in release.lua: whether waiter takes the lock handed
// over and its process subscribes on this server. Called with n.mu held.
func (n *Fake) taker(waiter string) bool {
	process, _, _, ok := node.Handoff(waiter)
	return ok && n.subscribers(node.WakePrefix+process) > 0
}

// handOver is hand_over in release.lua: it hands the lock key over to
// waiter when taker says so, and returns what the announcement returned
// (0: not handed). Called with n.mu held.
func (n *Fake) handOver(key, id, waiter string) int {
	if !n.taker(waiter) {
		return 0
	}
	process, ttl, token, _ := node.Handoff(waiter)
	now := time.Now().Add(n.ClockOffset).UnixMilli() // the node's clock
	n.Data[key] = Entry{Value: token, Expires: time.Now().Add(ttl), Holds: 1}
	return 2*n.publish(node.WakePrefix+process, fmt.Sprintf("%s|%s%s%d|%s", id, waiter, node.HandedMark, now, key)) + 1
}

// dropMark is release.lua's KEYS[3]: a reader-writer lock's writer drops
// its waiting mark if it is still its own, whatever the name holds. The
// mark's key travels only with a release that announces, and names the
// queue (see node.Release.Encode). Called with n.mu held.
func (n *Fake) dropMark(r *node.Release) {
	if r.Intent == "" || r.Reentrant || r.Channel == "" || n.beside(r.Key, r.QueueKey) == "" {
		return
	}
	mark := n.beside(r.Key, r.Intent)
	if e, ok := n.entry(mark); ok && e.Value == r.Writer {
		delete(n.Data, mark)
	}
}
