package conformance

import (
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// The cases of a plain, fenced and reentrant lock, and of a multi-name one
// (see Cases).

const ttl = 10 * time.Second

// Ops of the cases, on name k.

func lock(k, token string) *node.Acquire { return &node.Acquire{Key: k, Token: token, TTL: ttl} }

func fenced(k, token string) *node.Acquire {
	return &node.Acquire{Key: k, Token: token, TTL: ttl, FenceKey: node.FenceKey(k)}
}

func reentrant(k, owner string, reenter bool) *node.Acquire {
	return &node.Acquire{Shape: node.Reentrant, Key: k, Token: owner, TTL: ttl, Reenter: reenter}
}

func unlock(k, token string) *node.Release {
	return &node.Release{Key: k, Token: token, Channel: node.ReleaseChannel(k), QueueKey: node.QueueKey(k)}
}

func undo(k, token string) *node.Release { return &node.Release{Key: k, Token: token} }

func drop(k, owner string, d node.Drop) *node.Release {
	return &node.Release{Shape: node.Reentrant, Key: k, Token: owner, Drop: d, Channel: node.ReleaseChannel(k), QueueKey: node.QueueKey(k), Notice: owner + "-n"}
}

func extend(k, token string, d time.Duration) *node.Extend {
	return &node.Extend{Key: k, Token: token, TTL: d}
}

func fence(k, token string, to uint64) *node.Fence {
	return &node.Fence{Key: k, Token: token, FenceKey: node.FenceKey(k), Fence: to}
}

func short(a *node.Acquire) *node.Acquire { a.TTL = time.Second; return a }

func wait(d time.Duration) step { return step{wait: d} }

// queueOf queues members on name k, oldest first.
func queueOf(k string, members ...string) *node.Queue {
	q := &node.Queue{}
	for i, m := range members {
		q.Changes = append(q.Changes, node.QueueChange{Lock: k, Member: m, Score: int64(i + 1), TTL: ttl})
	}
	return q
}

var (
	granted = answer{OK: true}
	refused = answer{}
	// A release that finds the key absent, or another's, names the
	// server that answered (Server), when it is the release that frees
	// (it announces, or is a reentrant lock's last Unlock); an undo's,
	// or the drop of one hold of many, names none.
	gone      = answer{Gone: true, Server: true}
	goneQuiet = answer{Gone: true}
	taken     = answer{Taken: true, Server: true}
	wrong     = answer{Err: misconfigured}
)

func heldBy(holder string) answer { return answer{Holder: holder} }

func lockCases() []Case {
	return []Case{
		{"plain grant, refusal names the holder, resend", nil, func(k string) []step {
			return []step{
				{op: lock(k, "a"), want: granted},
				{op: lock(k, "b"), want: heldBy("a")},
				{op: lock(k, "a"), want: granted}, // the client resent an applied SET
				{op: fenced(k, "b"), want: heldBy("a")},
			}
		}},
		{"plain lock expires", nil, func(k string) []step {
			return []step{
				{op: short(lock(k, "a")), want: granted},
				wait(2 * time.Second),
				{op: lock(k, "b"), want: granted},
				{op: undo(k, "a"), want: refused},
			}
		}},
		{"release own, another's, absent", nil, func(k string) []step {
			return []step{
				{op: lock(k, "a"), want: granted},
				{op: unlock(k, "b"), want: taken},
				{op: undo(k, "b"), want: refused}, // an undo says nothing of another's
				{op: unlock(k, "a"), want: granted},
				{op: unlock(k, "a"), want: gone},
				{op: undo(k, "a"), want: goneQuiet},
				{op: lock(k, "b"), want: granted},
			}
		}},
		{"extend own, another's, absent", nil, func(k string) []step {
			return []step{
				{op: short(lock(k, "a")), want: granted},
				{op: extend(k, "b", ttl), want: refused},
				{op: extend(k, "a", ttl), want: granted},
				wait(2 * time.Second),
				{op: lock(k, "b"), want: heldBy("a")}, // extended past its first TTL
				{op: unlock(k, "a"), want: granted},
				{op: extend(k, "a", ttl), want: refused},
				{op: lock(k, "b"), want: granted}, // the extend created nothing
			}
		}},
		{"fencing: counter with the grant, raised never lowered", nil, func(k string) []step {
			return []step{
				{op: fenced(k, "a"), want: granted},
				{op: fence(k, "a", 5), want: granted},
				{op: fenced(k, "b"), want: answer{Holder: "a", Counter: 5}},
				{op: fenced(k, "a"), want: answer{OK: true, Counter: 5}},
				{op: fence(k, "a", 3), want: granted},
				{op: fenced(k, "b"), want: answer{Holder: "a", Counter: 5}},
				{op: fence(k, "b", 7), want: refused}, // not the holder, raised all the same
				{op: unlock(k, "a"), want: granted},
				{op: fence(k, "a", 9), want: refused}, // no longer held
				{op: fenced(k, "b"), want: answer{OK: true, Counter: 9}},
			}
		}},
		{"reentrant: reenter, drop one, drop all", nil, func(k string) []step {
			return []step{
				{op: reentrant(k, "o", true), want: refused}, // a reenter never creates the key
				{op: reentrant(k, "o", false), want: granted},
				{op: reentrant(k, "p", false), want: heldBy("o")}, // the owner named
				{op: reentrant(k, "p", true), want: heldBy("o")},
				{op: reentrant(k, "o", true), want: granted},
				{op: drop(k, "o", node.DropOne), want: granted},
				{op: drop(k, "o", node.DropOne), want: granted}, // never frees the lock
				{op: reentrant(k, "p", false), want: heldBy("o")},
				{op: drop(k, "p", node.DropAll), want: taken},
				{op: drop(k, "o", node.DropAll), want: granted},
				{op: drop(k, "o", node.DropAll), want: gone},
				{op: drop(k, "o", node.DropOne), want: goneQuiet},
				{op: reentrant(k, "o", true), want: refused},
				{op: reentrant(k, "p", false), want: granted},
			}
		}},
		{"reentrant: undo, extend, fence", nil, func(k string) []step {
			fe := reentrant(k, "o", false)
			fe.FenceKey = node.FenceKey(k)
			f := &node.Fence{Key: k, Token: "o", FenceKey: node.FenceKey(k), Fence: 4, Reentrant: true}
			ex := &node.Extend{Shape: node.Reentrant, Key: k, Token: "o", TTL: ttl}
			return []step{
				{op: fe, want: granted},
				{op: reentrant(k, "o", true), want: granted},
				{op: f, want: granted},
				{op: fence(k, "o", 6), want: refused}, // not a plain lock
				{op: ex, want: granted},
				{op: extend(k, "o", ttl), want: refused},
				{op: drop(k, "o", node.DropUndo), want: granted},
				{op: drop(k, "o", node.DropUndo), want: granted}, // the last hold: frees
				{op: drop(k, "o", node.DropUndo), want: goneQuiet},
				{op: ex, want: refused},
				{op: fenced(k, "a"), want: answer{OK: true, Counter: 6}},
			}
		}},
		{"plain and reentrant on one name", nil, func(k string) []step {
			ex := &node.Extend{Shape: node.Reentrant, Key: k, Token: "a", TTL: ttl}
			return []step{
				{op: lock(k, "a"), want: granted},
				{op: reentrant(k, "a", false), want: refused},
				{op: drop(k, "a", node.DropAll), want: taken},
				{op: ex, want: refused},
				{op: unlock(k, "a"), want: granted},
				{op: reentrant(k, "o", false), want: granted},
				{op: lock(k, "o"), want: refused}, // a hash: held, by no token to name
				{op: fenced(k, "o"), want: refused},
				{op: unlock(k, "o"), want: taken},
				{op: extend(k, "o", ttl), want: refused},
			}
		}},
		{"waiters' queue: the oldest is named", nil, func(k string) []step {
			q := &node.Queue{Changes: []node.QueueChange{
				{Lock: k, Member: "p/w2", Score: 2, TTL: ttl},
				{Lock: k, Member: "p/w1", Score: 1, TTL: ttl},
				{Lock: k, Member: "p/w3", Score: 3, TTL: ttl},
				{Lock: k, Member: "p/w2", Score: 0, TTL: ttl}, // NX: keeps its place
				{Lock: k, Member: "p/w3", Remove: true},
			}}
			named := answer{OK: true, Named: true}
			return []step{
				{op: q, want: granted},
				{op: lock(k, "a"), want: granted},
				{op: undo(k, "a"), want: granted}, // an undo names no one
				{op: lock(k, "a"), want: granted},
				{op: &node.Release{Key: k, Token: "a", Channel: node.ReleaseChannel(k)}, want: granted}, // nor a release without the queue
				{op: lock(k, "a"), want: granted},
				{op: unlock(k, "a"), want: named}, // p/w1
				{op: reentrant(k, "o", false), want: granted},
				{op: drop(k, "o", node.DropAll), want: named}, // p/w2
				{op: lock(k, "a"), want: granted},
				{op: unlock(k, "a"), want: granted}, // none left
			}
		}},
		{"waiters' queue: a plain lock is handed over to a listening waiter", []Capability{Handoff}, func(k string) []step {
			process := "hand-" + k // a wake channel of its own, whatever key the side gives
			q := &node.Queue{Changes: []node.QueueChange{
				{Lock: k, Member: node.HandoffMember(process, ttl, "t1"), Score: 1, TTL: ttl},
				{Lock: k, Member: node.HandoffMember("gone-"+k, ttl, "t2"), Score: 2, TTL: ttl},
				{Lock: k, Member: process + "/w3", Score: 3, TTL: ttl},
				{Lock: k, Member: node.HandoffMember(process, ttl, "t4"), Score: 4, TTL: ttl},
			}}
			handed := answer{OK: true, Named: true, Heard: 1}
			return []step{
				{wake: process},
				{op: q, want: granted},
				{op: lock(k, "a"), want: granted},
				{op: unlock(k, "a"), want: handed},             // to t1
				{op: lock(k, "b"), want: answer{Holder: "t1"}}, // no gap to take it in
				{op: lock(k, "t1"), want: granted},             // the waiter's own
				// t2's process does not subscribe here: it is named, as
				// any waiter, and makes its own attempt (no one hears it).
				{op: unlock(k, "t1"), want: answer{OK: true, Named: true}},
				{op: lock(k, "b"), want: granted}, // named, not handed
				{op: undo(k, "b"), want: granted}, // an undo hands nothing over
				{op: fenced(k, "f"), want: granted},
				{op: unlock(k, "f"), want: handed},             // w3 is named
				{op: lock(k, "b"), want: granted},              // named, not handed
				{op: unlock(k, "b"), want: handed},             // to t4
				{op: lock(k, "c"), want: answer{Holder: "t4"}}, // no gap to take it in
				{op: unlock(k, "t4"), want: granted},           // the queue is empty
				{op: &node.Queue{Changes: []node.QueueChange{
					{Lock: k, Member: process + "/w5", Score: 5, TTL: ttl},
				}}, want: granted},
				{op: unlock(k, "t4"), want: gone}, // free here: a plain waiter is left to its turn
				{op: &node.Queue{Changes: []node.QueueChange{
					{Lock: k, Member: process + "/w5", Remove: true},
					{Lock: k, Member: node.HandoffMember(process, ttl, "t6"), Score: 6, TTL: ttl},
				}}, want: granted},
				{op: unlock(k, "t4"), want: gone},              // free here: handed over all the same
				{op: lock(k, "b"), want: answer{Holder: "t6"}}, // to t6
			}
		}},
		{"waiters' queue: a release names no member of the releaser's own", nil, func(k string) []step {
			process := "own-" + k
			own := "mine-" + k + "/w1" // the wait that took the lock: its process does not listen here
			release := unlock(k, "a")
			release.Queued = own
			return []step{
				{wake: process},
				{listen: true},
				{op: queueOf(k, own, process+"/w2"), want: granted},
				{op: lock(k, "a"), want: granted},
				{op: release, want: answer{OK: true, Named: true, Heard: 1}}, // w2, not w1
				{op: lock(k, "b"), want: granted},                            // free: w1 was not handed it either
			}
		}},
		{"waiters' queue: a reentrant release names no member of the releaser's own", nil, func(k string) []step {
			process := "own-" + k
			own := "mine-" + k + "/w1" // the wait that took the lock: its process does not listen here
			release := drop(k, "o", node.DropAll)
			release.Queued = own
			return []step{
				{wake: process},
				{listen: true},
				{op: queueOf(k, own, process+"/w2"), want: granted},
				{op: reentrant(k, "o", false), want: granted},
				{op: release, want: answer{OK: true, Named: true, Heard: 1}}, // w2, not w1
				{op: queueOf(k, own), want: granted},
				{op: reentrant(k, "o", false), want: granted},
				{op: drop(k, "o", node.DropAll), want: answer{OK: true, Named: true}}, // without Queued: w1, which no one hears
			}
		}},
		{"waiters' queue: a release removes the releaser's own member first, never handed over to it", []Capability{Handoff}, func(k string) []step {
			process := "own-" + k
			own := node.HandoffMember(process, ttl, "t1") // the wait that took the lock
			release := func(token string) *node.Release {
				r := unlock(k, token)
				r.Queued = own
				return r
			}
			return []step{
				{wake: process},
				{op: queueOf(k, own, process+"/w2"), want: granted},
				{op: lock(k, "a"), want: granted},
				{op: release("a"), want: answer{OK: true, Named: true, Heard: 1}}, // w2 named, not handed to t1
				{op: lock(k, "b"), want: granted},                                 // free: no gap taken by t1
				{op: queueOf(k, own), want: granted},
				{op: unlock(k, "b"), want: answer{OK: true, Named: true, Heard: 1}}, // without Queued: handed to t1
				{op: lock(k, "c"), want: answer{Holder: "t1"}},
				{op: unlock(k, "t1"), want: granted},
				{listen: true},
				{op: queueOf(k, own), want: granted},
				{op: lock(k, "a"), want: granted},
				{op: release("a"), want: answer{OK: true, Heard: 1}}, // the queue held the releaser alone: to every waiter
				{op: lock(k, "d"), want: granted},
			}
		}},
		{"waiters' queue: a release told its member's score removes the member wherever it is", nil, func(k string) []step {
			process := "own-" + k
			own := "mine-" + k + "/w2" // the wait that took the lock, queued second (score 2)
			release := func(token string) *node.Release {
				r := unlock(k, token)
				r.Queued, r.QueuedSince = own, 2
				return r
			}
			queue := func(member string, score int64) *node.Queue {
				return &node.Queue{Changes: []node.QueueChange{{Lock: k, Member: member, Score: score, TTL: ttl}}}
			}
			return []step{
				{wake: process},
				{listen: true},
				{op: queueOf(k, process+"/w1", own), want: granted},
				{op: lock(k, "a"), want: granted},
				{op: release("a"), want: answer{OK: true, Named: true, Heard: 1}}, // w1, older than the member
				{op: queue(process+"/w5", 5), want: granted},
				{op: lock(k, "b"), want: granted},
				{op: unlock(k, "b"), want: answer{OK: true, Named: true, Heard: 1}}, // w5: the member went with the release before
				{op: queue(process+"/w6", 6), want: granted},
				{op: lock(k, "c"), want: granted},
				{op: release("c"), want: answer{OK: true, Named: true, Heard: 1}}, // w6, queued after the member
			}
		}},
		{"a plain release no one is queued for announces nothing", []Capability{QuietRelease}, func(k string) []step {
			return []step{
				{listen: true},
				{op: lock(k, "a"), want: granted},
				{op: unlock(k, "a"), want: granted}, // a compare-and-delete: the listener is not queued
				{op: &node.Queue{Changes: []node.QueueChange{{Lock: k, Member: "p/w1", Score: 1, TTL: ttl}}}, want: granted},
				{op: lock(k, "a"), want: granted},
				{op: unlock(k, "a"), want: answer{OK: true, Named: true}}, // p/w1, on p's channel: no one listens there
				{op: lock(k, "a"), want: granted},
				{op: unlock(k, "a"), want: granted}, // the queue is empty again
			}
		}},
		{"waiters' queue: a reader's turn is everyone's", nil, func(k string) []step {
			q := &node.Queue{Changes: []node.QueueChange{
				{Lock: k, Member: "p/" + node.ReaderMark + "1", Score: 1, TTL: ttl},
				{Lock: k, Member: "p/w2", Score: 2, TTL: ttl},
			}}
			return []step{
				{listen: true},
				{op: q, want: granted},
				{op: lock(k, "a"), want: granted},
				{op: unlock(k, "a"), want: answer{OK: true, Heard: 1}}, // on the name's channel, naming no one
			}
		}},
		{"a release is heard", nil, func(k string) []step {
			return []step{
				{listen: true},
				{op: lock(k, "a"), want: granted},
				{op: unlock(k, "b"), want: taken},
				{op: &node.Release{Key: k, Token: "a", Channel: node.ReleaseChannel(k)}, want: answer{OK: true, Heard: 1}}, // no queue: everyone's turn
				{op: reentrant(k, "o", false), want: granted},
				{op: drop(k, "o", node.DropAll), want: answer{OK: true, Heard: 1}},
			}
		}},
	}
}

// Multi-name locks: k and the names beside it.

func multi(k, token string, also ...string) *node.Acquire {
	return &node.Acquire{Shape: node.Multi, Key: k, Token: token, TTL: ttl, Also: also}
}

func multiExtend(k, token string, also ...string) *node.Extend {
	return &node.Extend{Shape: node.Multi, Key: k, Token: token, TTL: ttl, Also: also}
}

func multiUnlock(k, token string, also ...string) *node.Release {
	return &node.Release{Shape: node.Multi, Key: k, Token: token, Channel: node.ReleaseChannel(k), Also: also}
}

func multiCases() []Case {
	return []Case{
		{"multi-name: all or none", nil, func(k string) []step {
			k2, k3 := k+":2", k+":3"
			return []step{
				{op: lock(k3, "b"), want: granted},
				{op: multi(k, "a", k2, k3), want: heldBy("b")},
				{op: lock(k, "c"), want: granted}, // the refusal took no name
				{op: multi(k3, "a", k2, k), want: heldBy("b")},
				{op: unlock(k, "c"), want: granted},
				{op: unlock(k3, "b"), want: granted},
				{op: multi(k, "a", k2, k3), want: granted},
				{op: multi(k, "a", k2, k3), want: granted}, // resent
				{op: lock(k2, "c"), want: heldBy("a")},
				{op: multiExtend(k, "a", k2, k3), want: granted},
				{op: multiExtend(k, "b", k2, k3), want: refused},
				{op: multiUnlock(k, "b", k2, k3), want: taken},
				{op: multiUnlock(k, "a", k2, k3), want: granted},
				{op: multiUnlock(k, "a", k2, k3), want: gone},
				{op: lock(k3, "c"), want: granted},
			}
		}},
		{"multi-name: one name lost", nil, func(k string) []step {
			k2 := k + ":2"
			return []step{
				{listen: true},
				{op: &node.Acquire{Shape: node.Multi, Key: k, Also: []string{k2}, Token: "a", TTL: time.Second}, want: granted},
				{op: undo(k2, "a"), want: granted},
				{op: multiExtend(k, "a", k2), want: refused}, // extends none
				wait(2 * time.Second),
				{op: lock(k, "b"), want: granted},
				{op: lock(k2, "c"), want: granted},
				{op: multiUnlock(k, "a", k2), want: taken}, // both taken by others
				{op: multi(k2, "d", k), want: heldBy("c")},
				{op: unlock(k2, "c"), want: granted},
				{op: multi(k2, "b", k), want: granted}, // k is b's already
				{op: multiUnlock(k2, "b", k), want: answer{OK: true, Heard: 1}},
			}
		}},
		{"multi-name: refused by a reentrant lock", nil, func(k string) []step {
			k2 := k + ":2"
			return []step{
				{op: reentrant(k2, "o", false), want: granted},
				{op: multi(k, "a", k2), want: refused},
				{op: lock(k, "b"), want: granted},
				{op: multiExtend(k, "b", k2), want: refused},
				{op: multiUnlock(k2, "b", k), want: granted}, // deletes k, the name b holds
				{op: lock(k, "c"), want: granted},
			}
		}},
	}
}
