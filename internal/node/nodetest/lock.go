package nodetest

import (
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// A lock's operations, by their shape as in package node, as
// acquire_plain.lua, acquire.lua, acquire_reentrant.lua,
// write_acquire.lua, fence.lua, extend*.lua and release*.lua answer them.
// Multi-name locks are in multi.go, the readers in rw.go, the semaphore
// in semaphore.go, the operator's forced release in ops.go.

// lockOp applies one lock operation; ok is false when op is none.
func (n *Fake) lockOp(op node.Op) (rep node.Reply, ok bool) {
	switch o := op.(type) {
	case *node.Acquire:
		return n.acquireOp(o), true
	case *node.Fence:
		return n.acked(o.Ack, n.reply(n.fence(o.Key, o.Token, o.FenceKey, o.Fence, o.Reentrant))), true
	case *node.Extend:
		return n.extendOp(o), true
	case *node.Release:
		return n.releaseOp(o), true
	}
	return node.Reply{}, false
}

// acquireOp applies an acquisition, as its shape's script does it.
func (n *Fake) acquireOp(o *node.Acquire) node.Reply {
	fenceKey := o.FenceKey
	var grant func() (bool, string, error)
	switch o.Shape {
	case node.Read:
		return n.readAcquire(o)
	case node.Semaphore:
		return n.semAcquire(o)
	case node.Reentrant:
		grant = func() (bool, string, error) { return n.grantReentrant(o) }
	case node.Multi:
		grant, fenceKey = func() (bool, string, error) { return n.grantAll(o) }, ""
	case node.Write:
		grant = func() (bool, string, error) { return n.grantWriter(o) }
	default:
		rearm := o.FenceKey == "" && o.MinUptime == 0
		grant = func() (bool, string, error) { return n.grantPlain(o.Key, o.Token, o.TTL, rearm) }
	}
	return n.acked(o.Ack, n.acquire(o.Key, fenceKey, o.MinUptime, grant))
}

// extendOp applies an extension, as its shape's script does it.
func (n *Fake) extendOp(o *node.Extend) node.Reply {
	switch o.Shape {
	case node.Read:
		return n.reply(n.readExtend(o))
	case node.Semaphore:
		return n.reply(n.semExtend(o))
	}
	keys := append([]string{o.Key}, o.Also...)
	return n.acked(o.Ack, n.reply(n.extend(keys, o.Token, o.TTL, o.Shape == node.Reentrant)))
}

// releaseOp applies a release, as its shape's script does it.
func (n *Fake) releaseOp(o *node.Release) node.Reply {
	release, told := n.releasePlain, o.Channel != ""
	switch o.Shape {
	case node.Read:
		return n.resent(func() node.Reply { return n.readRelease(o) })
	case node.Semaphore:
		return n.semRelease(o)
	case node.Any:
		return n.forceRelease(o)
	case node.Reentrant:
		release, told = n.releaseReentrant, o.Drop == node.DropAll
	case node.Write:
		release = n.releaseWriter
	case node.Multi:
		release = n.releaseAll
	}
	return n.release(o.Key, told, func() (bool, int, bool) { return release(o) })
}

// acquire applies grant, an acquisition of key as a script does it: after
// the restart delay's check (minUptime), reading the fencing counter
// fenceKey ("" for none) with the grant or refusal.
func (n *Fake) acquire(key, fenceKey string, minUptime int64, grant func() (bool, string, error)) node.Reply {
	var counter uint64
	var holder string
	var refusal error
	ok, err := n.apply("acquire", key, func() bool {
		if refusal = n.recovering(minUptime); refusal != nil {
			return false
		}
		if fenceKey != "" {
			counter = n.Counters[fenceKey]
		}
		var granted bool
		granted, holder, refusal = grant()
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

// grantPlain is acquire_plain.lua and acquire.lua (and held() in
// stored.lua): SET NX, naming the holder of a plain lock; rearm re-arms
// the TTL of a key that holds token already (acquire_plain.lua's). It
// says whether it granted, else who holds the key, or the script's error
// reply. Called with n.mu held.
func (n *Fake) grantPlain(key, token string, ttl time.Duration, rearm bool) (bool, string, error) {
	switch k := n.kind(key); k {
	case kindNone:
		n.Data[key] = Entry{Value: token, Expires: time.Now().Add(ttl), Holds: 1}
		return true, "", nil
	case kindString:
		e := n.Data[key]
		if e.Value != token {
			return false, e.Value, nil // SET NX GET names the holder
		}
		if rearm {
			// A retried request, or a lock handed over.
			e.Expires = time.Now().Add(ttl)
			n.Data[key] = e
		}
		return true, "", nil // a retried SET NX GET that had been applied
	case kindZset:
		return false, "", notALock(key, k)
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
			return false, e.Value, nil // another owner's, named
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
	return n.grantPlain(r.Key, r.Token, r.TTL, false)
}

// fence is fence.lua: the counter raised, and whether key holds token (as
// a reentrant lock's owner when hash).
func (n *Fake) fence(key, token, fenceKey string, fence uint64, hash bool) (bool, error) {
	return n.apply("fence", key, func() bool {
		n.Counters[fenceKey] = max(n.Counters[fenceKey], fence)
		e, ok := n.entry(key)
		return ok && e.Value == token && e.Hash == hash
	})
}

// extend is extend.lua, extend_reentrant.lua (hash) and extend_multi.lua:
// every key must hold the token, or none is extended.
func (n *Fake) extend(keys []string, token string, ttl time.Duration, hash bool) (bool, error) {
	return n.apply("extend", keys[0], func() bool {
		for _, k := range keys {
			if e, ok := n.entry(k); !ok || e.Value != token || e.Hash != hash {
				return false
			}
		}
		for _, k := range keys {
			e := n.Data[k]
			e.Expires = time.Now().Add(ttl)
			n.Data[k] = e
		}
		return true
	})
}

// release runs release, a release of key (it says whether key held the
// token, what its announcement returned, see announce, and whether the
// key was gone), applied twice when the fake resends. told says whether
// its answer names the server when the key was another's (see taken in
// stored.lua).
func (n *Fake) release(key string, told bool, release func() (ok bool, heard int, gone bool)) node.Reply {
	return n.resent(func() node.Reply {
		heard, gone := 0, false
		ok, err := n.apply("release", key, func() bool {
			var ok bool
			ok, heard, gone = release()
			return ok
		})
		return n.released(ok, heard, gone && err == nil, told && !ok && !gone && err == nil, told, err)
	})
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
// permit, the reader) was absent, taken when it was another's, each with
// the run id of the server that answered when the release is the one
// that frees (told: it announces, or is a reentrant lock's last Unlock;
// an undo's names none); otherwise heard, what its announcement returned
// (see announce).
func (n *Fake) released(ok bool, heard int, gone, taken, told bool, err error) node.Reply {
	rep := node.Reply{OK: ok, Err: err}
	switch {
	case gone || taken:
		var server string
		if told {
			n.mu.Lock()
			server = n.identify()[0] // the release script says which server answered
			n.mu.Unlock()
		}
		rep.Value = node.Released{Gone: gone, Taken: taken, Server: server}
	case heard > 0:
		rep.Value = node.Released{Heard: heard / 2, Named: heard%2 == 1}
	}
	return rep
}

// releasePlain is release.lua for a plain lock: the release that frees it
// hands it over to the oldest waiter when it takes it so, else announces
// it naming that waiter; with no one queued it announces nothing
// (release_head.lua). A key already absent is handed over too (see
// handOverFree). The releaser's own member goes first (Queued). Called
// with n.mu held.
func (n *Fake) releasePlain(r *node.Release) (ok bool, heard int, gone bool) {
	queue := n.beside(r.Key, r.QueueKey)
	// No one queued: a compare-and-delete (release_head.lua), decided
	// before the releaser's own member goes (ARGV[4]).
	quiet := queue != "" && len(n.Queues[queue]) == 0
	if r.Queued != "" && r.Channel != "" && queue != "" {
		delete(n.Queues[queue], r.Queued)
	}
	e, held := n.entry(r.Key)
	switch {
	case !held:
		free := n.kind(r.Key) == kindNone
		if free && r.Channel != "" {
			n.handOverFree(r)
		}
		return false, 0, free
	case e.Value != r.Token || e.Hash:
		return false, 0, false
	}
	delete(n.Data, r.Key)
	if r.Channel == "" || quiet {
		return true, 0, false
	}
	return true, n.handOverOrAnnounce(r, queue), false
}

// handOverOrAnnounce announces r, a plain release that freed the lock: to
// the oldest waiter of queue, popped from it, to whom it hands the lock
// over when it takes it so (a node refused scripts, spoken to with
// transactions, hands nothing over: see conformance.Lacks). It returns
// what the announcement returned. Called with n.mu held.
func (n *Fake) handOverOrAnnounce(r *node.Release, queue string) int {
	waiter, heard := n.popWaiter(queue), 0
	if queue != "" && !n.NoScripts { // a transaction hands nothing over
		heard = n.handOver(r.Key, r.Token, waiter)
	}
	if heard == 0 {
		heard = n.announce(r.Key, r.Channel, r.Token, waiter)
	}
	return heard
}

// releaseReentrant is release_reentrant.lua. Called with n.mu held.
func (n *Fake) releaseReentrant(r *node.Release) (ok bool, heard int, gone bool) {
	if queue := n.beside(r.Key, r.QueueKey); r.Queued != "" && r.Channel != "" && queue != "" {
		delete(n.Queues[queue], r.Queued) // ARGV[5]: the releaser's own member
	}
	e, held := n.entry(r.Key)
	switch {
	case !held:
		return false, 0, n.kind(r.Key) == kindNone
	case e.Value != r.Token || !e.Hash:
		return false, 0, false
	case r.Drop == node.DropUndo && e.Holds > 1:
		e.Holds-- // an undo deletes the key with its last hold
		n.Data[r.Key] = e
		return true, 0, false
	case r.Drop == node.DropOne:
		e.Holds = max(1, e.Holds-1) // dropping one hold never frees the lock
		n.Data[r.Key] = e
		return true, 0, false
	}
	return true, n.freeNaming(r.Key, r.Channel, r.QueueKey, r.Notice), false
}

// releaseWriter is release.lua with a writer's mark (KEYS[3]): the
// writer drops its waiting mark if it is still its own, whatever the name
// holds; the mark's key travels only with a release that announces and
// names the queue (see node.Release). Called with n.mu held.
func (n *Fake) releaseWriter(r *node.Release) (ok bool, heard int, gone bool) {
	if queue := n.beside(r.Key, r.QueueKey); r.Channel != "" && queue != "" {
		if r.Queued != "" {
			delete(n.Queues[queue], r.Queued) // ARGV[4]: the releaser's own member
		}
		mark := n.beside(r.Key, r.Intent)
		if e, ok := n.entry(mark); ok && e.Value == r.Writer {
			delete(n.Data, mark)
		}
	}
	e, held := n.entry(r.Key)
	switch {
	case !held:
		return false, 0, n.kind(r.Key) == kindNone
	case e.Value != r.Token || e.Hash:
		return false, 0, false
	}
	return true, n.freeNaming(r.Key, r.Channel, r.QueueKey, r.Token), false
}

// freeNaming deletes key and announces it on channel ("": not at all)
// with payload, naming the oldest waiter of queueKey, popped from it; it
// returns what the announcement returned. Called with n.mu held.
func (n *Fake) freeNaming(key, channel, queueKey, payload string) int {
	delete(n.Data, key)
	if channel == "" {
		return 0
	}
	return n.announce(key, channel, payload, n.popWaiter(n.beside(key, queueKey)))
}

// handOverFree is release.lua's plain release of a key that is absent:
// the oldest waiter gets it handed over when it takes it so. Called with
// n.mu held.
func (n *Fake) handOverFree(r *node.Release) {
	queue := n.beside(r.Key, r.QueueKey)
	if queue == "" || n.NoScripts { // a transaction hands nothing over
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
	now := time.Now().Add(n.ClockOffset).Truncate(time.Millisecond) // the node's clock
	n.Data[key] = Entry{Value: token, Expires: time.Now().Add(ttl), Holds: 1}
	notice := node.Notice{ID: id, Member: waiter, Name: key, Handed: true, At: now}
	return 2*n.publish(node.WakeChannel(process), notice.String()) + 1
}
