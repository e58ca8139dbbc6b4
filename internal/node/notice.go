package node

import (
	"strconv"
	"strings"
	"time"
)

// Notice is what an announced release publishes (announce.lua and
// hand_over in release.lua build it in the scripts; this type everywhere
// else, both ways). On a lock's release channel it is "id|": the release
// of id, to every waiter. On a process's wake channel it names the queue
// member whose turn it is: "id|member|name"; and when the release handed
// the lock over to that member, "id|member#h<ms>|name", with the node's
// time in Unix milliseconds (0 when its user may not read it).
type Notice struct {
	// ID is the release's notice id: the lease's token, or a reentrant
	// lease's notice.
	ID string
	// Member is the queue member named, "" for none; Name the lock's name
	// when a member is named.
	Member, Name string
	// Handed is set when the release handed the lock over to Member, At
	// then being the node's time (zero when unknown).
	Handed bool
	At     time.Time
}

// String is the notice as published.
func (n Notice) String() string {
	if n.Member == "" {
		return n.ID + "|"
	}
	member := n.Member
	if n.Handed {
		ms := int64(0)
		if !n.At.IsZero() {
			ms = n.At.UnixMilli()
		}
		member += HandedMark + strconv.FormatInt(ms, 10)
	}
	return n.ID + "|" + member + "|" + n.Name
}

// ParseNotice reads a notice as published on channel.
func ParseNotice(channel, payload string) Notice {
	id, rest, _ := strings.Cut(payload, "|")
	if !strings.HasPrefix(channel, WakePrefix) {
		return Notice{ID: id, Name: strings.TrimPrefix(channel, ChannelPrefix)}
	}
	member, name, _ := strings.Cut(rest, "|")
	n := Notice{ID: id, Name: name}
	n.Member, n.Handed = member, false
	if m, at, handed := strings.Cut(member, HandedMark); handed {
		n.Member, n.Handed = m, true
		if ms, err := strconv.ParseInt(at, 10, 64); err == nil && ms > 0 {
			n.At = time.UnixMilli(ms)
		}
	}
	return n
}

// Handed is one node's handoff of the lock to a waiter (see
// internal/waitq): node Node set the lock to Token, the waiter's.
type Handed struct {
	Node  int
	Token string
	// Released is the token whose release handed the lock over (the
	// notice's id): other nodes may still hold it, their release on its
	// way.
	Released string
	// NodeTime is the node's clock when it handed the lock over; zero
	// when the node did not say.
	NodeTime time.Time
	// At is when this process heard it.
	At time.Time
}
