package node

import (
	"strconv"
	"strings"
	"time"
)

// The keys and channels a lock keeps beside its name, in one place. Every
// key is the name plus a suffix, so that an ACL key pattern that covers the
// name covers them too; a Redis Cluster node keeps them in the name's hash
// slot instead (see Layout.Beside).

const (
	// ChannelPrefix starts every lock's release channel.
	ChannelPrefix = "redlock:released:"
	// WakePrefix starts every process's wake channel.
	WakePrefix = "redlock:wake:"
)

// FenceKey is where each node keeps the fencing counter of lock name.
func FenceKey(name string) string { return name + ":redlock:fence" }

// QueueKey is where each node keeps the queue of waiters of lock name.
func QueueKey(name string) string { return name + ":redlock:waiters" }

// PermitsKey is where each node keeps the permit count of semaphore name,
// so that two semaphores with different counts cannot share the name.
func PermitsKey(name string) string { return name + ":redlock:permits" }

// ReleaseChannel is the pub/sub channel on which releases of name are
// announced.
func ReleaseChannel(name string) string { return ChannelPrefix + name }

// WakeChannel is where a release that names a waiter of the process whose
// waiters have id self announces it, for every lock name: only the process
// whose turn it is hears it.
func WakeChannel(self string) string { return WakePrefix + self }

// Layout is how a node keeps the keys a lock keeps beside its name.
type Layout struct {
	// Sharded is set for a Redis Cluster or a Ring: a script's keys must
	// hash to one slot.
	Sharded bool
}

// Beside returns key, which lock name keeps beside its own (name + a
// suffix), as a node of this layout stores it. A plain node stores it as
// it is. On a Redis Cluster (or a Ring) a script's keys must hash to one
// slot, so key is renamed where needed to hash like name: a name with a
// hash tag keeps its tag, and key is unchanged; a name without braces
// becomes the tag ("{orders}:redlock:fence" hashes like "orders"); a name
// with braces but no usable tag ("a{}b") cannot share its slot with any
// other key: "" (fencing is refused for such a name on such a node, and
// waiters are not queued there).
func (l Layout) Beside(name, key string) string {
	if !l.Sharded || key == "" {
		return key
	}
	return Slotted(name, key)
}

// Slotted is Beside for a sharded node.
func Slotted(name, key string) string {
	if !strings.ContainsAny(name, "{}") {
		return "{" + name + "}" + strings.TrimPrefix(key, name)
	}
	if open := strings.IndexByte(name, '{'); open >= 0 {
		if end := strings.IndexByte(name[open+1:], '}'); end > 0 {
			return key // the name's tag stays the key's first one
		}
	}
	return ""
}

// keys is name followed by other, a key the name keeps beside it, as a
// node of layout l stores it; name alone when other is "" or cannot be
// kept in the name's slot.
func (l Layout) keys(name, other string) []string {
	if o := l.Beside(name, other); o != "" {
		return []string{name, o}
	}
	return []string{name}
}

// A member of a lock's queue of waiters is "process/waiter": the id of the
// waiter's process (its wake channel's suffix), then the waiter's own part,
// which says how a release treats it (ReaderMark, HandoffMark, or neither).
// This file alone builds and reads them.

// WaiterMember is the queue member of a waiter of process self with its
// own part w (a reader's is marked with ReaderMark).
func WaiterMember(self, w string, reader bool) string {
	if reader {
		return self + "/" + ReaderMark + w
	}
	return self + "/" + w
}

// MemberProcess returns the process of queue member m; ok is false for
// what is no member.
func MemberProcess(m string) (process string, ok bool) {
	process, _, ok = strings.Cut(m, "/")
	return process, ok
}

// ReaderMark starts the waiter part of a waiting reader's queue member
// ("process/r-..."): a release whose turn is a reader's is announced to
// every waiter, as all readers may go.
const ReaderMark = "r-"

// Named reports whether a release whose turn is waiter (a queue member,
// "" for none) names it, and so is announced to its process only: a
// member of a process's that is not a reader's.
func Named(waiter string) bool {
	_, w, ok := strings.Cut(waiter, "/")
	return ok && !strings.HasPrefix(w, ReaderMark)
}

// HandoffMark starts the waiter part of a queue member that takes the lock
// handed over ("process/h-<ttl ms>-<token>"): a plain lock's release sets
// the key to the member's token for the member's TTL in the step that
// deletes it, when the member's process subscribes on the server that runs
// the release (see taker in release.lua).
const HandoffMark = "h-"

// HandedMark follows the member in the announcement of a release that
// handed the lock over, then the node's time in Unix milliseconds (0 when
// the node's user may not read it): "id|member#h<ms>|name".
const HandedMark = "#h"

// HandoffMember is the queue member of a waiter of process self that takes
// the lock handed over: token for ttl (rounded up to a millisecond).
func HandoffMember(self string, ttl time.Duration, token string) string {
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	return self + "/" + HandoffMark + strconv.FormatInt(int64(ms), 10) + "-" + token
}

// Handoff parses a member made by HandoffMember; ok is false for any other
// member.
func Handoff(member string) (process string, ttl time.Duration, token string, ok bool) {
	process, w, found := strings.Cut(member, "/")
	rest, isHandoff := strings.CutPrefix(w, HandoffMark)
	if !found || !isHandoff || process == "" {
		return "", 0, "", false
	}
	ms, token, found := strings.Cut(rest, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !found || err != nil || n <= 0 || token == "" {
		return "", 0, "", false
	}
	return process, time.Duration(n) * time.Millisecond, token, true
}

// The names of a Multi lock (see Shape): a Redis Cluster node needs them
// in one hash slot, as a script's keys must be there.

// allKeys is name followed by also.
func allKeys(name string, also []string) []string {
	if len(also) == 0 {
		return []string{name}
	}
	return append([]string{name}, also...)
}

// SameSlot reports whether every name hashes to one Redis Cluster slot, as
// a script's keys must there.
func SameSlot(names []string) bool {
	for _, n := range names[1:] {
		if Slot(n) != Slot(names[0]) {
			return false
		}
	}
	return true
}

// Slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash
// tag, the part between the first "{" and the next "}" when not empty, or
// of the whole key, modulo 16384.
func Slot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := range len(key) {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
