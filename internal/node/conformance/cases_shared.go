package conformance

import (
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// The cases of a counting semaphore, of a reader-writer lock, and of a
// Mutex, a Semaphore and readers that use one name (see Cases).

func sem(k, token string, permits int) *node.Acquire {
	return &node.Acquire{Shape: node.Semaphore, Key: k, Token: token, TTL: ttl, Permits: permits}
}

func semShort(k, token string, permits int) *node.Acquire {
	s := sem(k, token, permits)
	s.TTL = time.Second
	return s
}

func semExtend(k, token string) *node.Extend {
	return &node.Extend{Shape: node.Semaphore, Key: k, Token: token, TTL: ttl}
}

func semRelease(k, token string) *node.Release {
	return &node.Release{Shape: node.Semaphore, Key: k, Token: token, Channel: node.ReleaseChannel(k), QueueKey: node.QueueKey(k)}
}

func full(holders int) answer { return answer{Holders: holders} }

func semCases() []Case {
	return []Case{
		{"semaphore: admit up to the permits", nil, func(k string) []step {
			return []step{
				{op: sem(k, "a", 2), want: granted},
				{op: sem(k, "b", 2), want: granted},
				{op: sem(k, "c", 2), want: full(2)},
				{op: sem(k, "a", 2), want: granted}, // resent: no second place
				{op: sem(k, "c", 3), want: wrong},   // another permit count
				{op: semRelease(k, "a"), want: granted},
				{op: semRelease(k, "a"), want: gone},
				{op: semExtend(k, "a"), want: refused},
				{op: semExtend(k, "b"), want: granted},
				{op: sem(k, "c", 2), want: granted},
				{op: &node.Release{Shape: node.Semaphore, Key: k, Token: "d"}, want: goneQuiet}, // an undo
			}
		}},
		{"semaphore: expired permits are dropped", nil, func(k string) []step {
			return []step{
				{listen: true},
				{op: semShort(k, "a", 2), want: granted},
				{op: sem(k, "b", 2), want: granted},
				{op: sem(k, "c", 2), want: full(2)},
				wait(2 * time.Second),
				{op: semExtend(k, "a"), want: refused},
				{op: sem(k, "c", 2), want: granted},
				{op: semRelease(k, "a"), want: gone},
				{op: semRelease(k, "b"), want: answer{OK: true, Heard: 1}},
				{op: semRelease(k, "c"), want: answer{OK: true, Heard: 1}},
				{op: sem(k, "d", 1), want: granted}, // no holder left: a new count
			}
		}},
		{"semaphore: the last permit expires with its count", nil, func(k string) []step {
			return []step{
				{op: semShort(k, "a", 1), want: granted},
				{op: sem(k, "b", 3), want: wrong},
				wait(2 * time.Second),
				{op: semRelease(k, "a"), want: gone},
				{op: sem(k, "b", 3), want: granted},
			}
		}},
		{"a Mutex on a semaphore's name", nil, func(k string) []step {
			return []step{
				{op: sem(k, "a", 2), want: granted},
				{op: lock(k, "a"), want: wrong},
				{op: fenced(k, "a"), want: wrong},
				{op: reentrant(k, "a", false), want: wrong},
				{op: multi(k, "a", k+":2"), want: wrong},
				{op: extend(k, "a", ttl), want: refused},
				{op: fence(k, "a", 1), want: refused},
				{op: unlock(k, "a"), want: taken}, // held, by another kind: not gone
				{op: drop(k, "a", node.DropAll), want: taken},
				{op: sem(k, "b", 2), want: granted},
			}
		}},
		{"a semaphore on a Mutex's name", nil, func(k string) []step {
			return []step{
				{op: lock(k, "a"), want: granted},
				{op: sem(k, "a", 2), want: wrong},
				{op: semExtend(k, "a"), want: wrong},
				{op: semRelease(k, "a"), want: wrong},
				{op: unlock(k, "a"), want: granted},
				{op: reentrant(k, "o", false), want: granted},
				{op: sem(k, "o", 2), want: wrong},
			}
		}},
	}
}

// A reader-writer lock: readers, and the writer (an Acquire with Intent).

func read(k, token string) *node.Acquire {
	return &node.Acquire{Shape: node.Read, Key: k, Token: token, TTL: ttl}
}

func readExtend(k, token string) *node.Extend {
	return &node.Extend{Shape: node.Read, Key: k, Token: token, TTL: ttl}
}

func readRelease(k, token string) *node.Release {
	return &node.Release{Shape: node.Read, Key: k, Token: token, Channel: node.ReleaseChannel(k), QueueKey: node.QueueKey(k)}
}

// write is writer w's attempt with token.
func write(k, w, token string) *node.Acquire {
	return &node.Acquire{Shape: node.Write, Key: k, Token: token, TTL: ttl, Intent: node.IntentKey(k), Writer: w, IntentTTL: ttl}
}

func writeRelease(k, w, token string) *node.Release {
	return &node.Release{Shape: node.Write, Key: k, Token: token, Channel: node.ReleaseChannel(k), QueueKey: node.QueueKey(k),
		Intent: node.IntentKey(k), Writer: w}
}

var writerWaits = answer{WriterWaits: true}

// oneExpired listens on k's channel, and makes r1 a reader of k for a
// second and r2 for the TTL, then waits until r1 expired.
func oneExpired(k string) []step {
	short := read(k, "r1")
	short.TTL = time.Second
	return []step{
		{listen: true},
		{op: short, want: granted},
		{op: read(k, "r2"), want: granted},
		wait(2 * time.Second),
	}
}

func rwCases() []Case {
	return []Case{
		{"a writer's release names no member of its own", nil, func(k string) []step {
			process := "own-" + k
			own := "mine-" + k + "/w1" // the writer's wait that took the lock
			release := writeRelease(k, "w", "t1")
			release.Queued = own
			return []step{
				{wake: process},
				{op: queueOf(k, own, process+"/w2"), want: granted},
				{op: write(k, "w", "t1"), want: granted},
				{op: release, want: answer{OK: true, Named: true, Heard: 1}}, // w2, not w1
			}
		}},
		{"readers share; a writer waits, then writes alone", nil, func(k string) []step {
			return []step{
				{op: read(k, "r1"), want: granted},
				{op: read(k, "r2"), want: granted},
				{op: write(k, "w", "t1"), want: refused}, // marks itself waiting
				{op: read(k, "r3"), want: writerWaits},
				{op: read(k, "r1"), want: granted}, // resent: already a reader
				{op: readExtend(k, "r2"), want: granted},
				{op: write(k, "v", "t2"), want: refused}, // another writer's mark stays
				{op: readRelease(k, "r1"), want: granted},
				{op: readRelease(k, "r2"), want: granted}, // the last reader frees
				{op: readRelease(k, "r2"), want: gone},
				{op: write(k, "w", "t3"), want: granted}, // drops its mark
				{op: write(k, "v", "t4"), want: heldBy("t3")},
				{op: read(k, "r3"), want: refused},
				{op: readRelease(k, "r2"), want: taken}, // a writer holds it: taken, not gone
				{op: writeRelease(k, "w", "t3"), want: granted},
				{op: read(k, "r3"), want: granted},
			}
		}},
		{"a writer's release drops its mark", nil, func(k string) []step {
			return []step{
				{op: read(k, "r1"), want: granted},
				{op: write(k, "w", "t1"), want: refused},
				{op: read(k, "r2"), want: writerWaits},
				{op: writeRelease(k, "v", "t1"), want: taken}, // not v's mark
				{op: read(k, "r2"), want: writerWaits},
				{op: writeRelease(k, "w", "t1"), want: taken}, // readers hold the name
				{op: read(k, "r2"), want: granted},
			}
		}},
		{"readers expire; extend and release of the absent", nil, func(k string) []step {
			return append(oneExpired(k),
				step{op: readExtend(k, "r1"), want: refused},
				step{op: readRelease(k, "r1"), want: gone},
				step{op: readRelease(k, "r2"), want: answer{OK: true, Heard: 1}},
				step{op: readExtend(k, "r2"), want: refused},
				step{op: &node.Release{Shape: node.Read, Key: k, Token: "r2"}, want: goneQuiet},
			)
		}},
		{"the last live reader's release is the last, beside expired readers", nil, func(k string) []step {
			return append(oneExpired(k),
				step{op: readRelease(k, "r2"), want: answer{OK: true, Heard: 1}}, // r1 expired: the name is free
				step{op: write(k, "w", "t1"), want: granted},
			)
		}},
		{"a Mutex on the readers' name", nil, func(k string) []step {
			return []step{
				{op: read(k, "r1"), want: granted},
				{op: lock(k, "a"), want: refused},
				{op: fenced(k, "a"), want: refused},
				{op: reentrant(k, "o", false), want: refused},
				{op: multi(k, "a", k+":2"), want: refused},
				{op: unlock(k, "r1"), want: taken},
				{op: extend(k, "r1", ttl), want: refused},
				{op: sem(k, "r1", 2), want: wrong},
				{op: read(k, "r2"), want: granted},
			}
		}},
		{"readers on a Mutex's or a semaphore's name", nil, func(k string) []step {
			k2 := k + ":sem"
			return []step{
				{op: lock(k, "a"), want: granted},
				{op: read(k, "r1"), want: refused},
				{op: readExtend(k, "a"), want: refused},
				{op: readRelease(k, "a"), want: taken}, // a Mutex holds it
				{op: readRelease(k, "r1"), want: taken},
				{op: write(k, "w", "t"), want: heldBy("a")},
				{op: write(k, "w", "a"), want: granted}, // resent
				{op: unlock(k, "a"), want: granted},
				{op: reentrant(k, "o", false), want: granted},
				{op: read(k, "r1"), want: refused},
				{op: readRelease(k, "r1"), want: taken}, // a reentrant Mutex's hash
				{op: write(k, "w", "t"), want: refused},
				{op: sem(k2, "s", 1), want: granted},
				{op: read(k2, "r1"), want: wrong},
				{op: write(k2, "w", "t"), want: wrong},
			}
		}},
	}
}
