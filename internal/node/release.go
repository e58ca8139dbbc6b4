package node

import (
	"errors"
	"strconv"
	"strings"

	"github.com/redlock-go/redlock/internal/scripts"
)

// Release drops Token's hold of Key, a lock of Shape, where Token holds it:
// a Plain or Write lock's key is deleted, a Reentrant lock's holds as Drop
// says, a Multi lock's names (Key and Also) all, a reader's hold or a
// permit alone. A release that frees the lock announces it on Channel (""
// announces nothing: an undo), handing the lock over to the oldest waiter
// of QueueKey when it takes it so (a Plain lock's, see release.lua), else
// naming it, popped from the queue. A node answers OK when Token held it.
// Its Value is a Released when the node said more.
//
// Of Shape Any, it is an operator's: it deletes Key whoever holds it, and
// announces the release on the name's channel to the next waiter of its
// queue, whatever Channel and QueueKey say; it never touches the fencing
// counter. A node then answers OK when it deleted something, and its Value
// is a Forced.
type Release struct {
	Key, Token        string
	Shape             Shape
	Channel, QueueKey string
	// Queued is the releaser's own member of the queue, left by the wait
	// that took the lock ("" for none): a Plain, Reentrant or Write
	// release removes it before it picks the waiter to hand over to or
	// name, since the wait's own removal goes in the background and may not
	// have reached the node.
	Queued string
	// QueuedSince is Queued's score in the queue (when its wait began,
	// Unix ms), 0 when not known. A plain release that pops a waiter
	// queued later knows Queued is not queued (it would have come first)
	// and spares its removal: in a run of hand-overs the releaser's member
	// was popped by the release that handed it the lock.
	QueuedSince int64
	// Also are a Multi lock's names after Key. Any Channel announces each
	// name's release on the name's own channel, naming no waiter.
	Also []string
	// Drop is what a Reentrant release drops.
	Drop Drop
	// Notice is the announcement's payload for a Reentrant lock, and
	// for any lock that Any finds reentrant: unique to the release, since
	// the token repeats when an owner's goroutines pass the lock on.
	Notice string
	// Intent and Writer are a Write lock's waiting mark's key and value
	// (see Acquire): the release drops the mark if it is still Writer's,
	// whatever the name holds. The mark's key travels only with a release
	// that announces and names the queue.
	Intent, Writer string
	enc            encoding
	// nenc keeps DELIFEQ's arguments and DELEX's, pub the
	// announcement's (see native.go).
	nenc, pub encoding
}

// Drop says what a reentrant release drops.
type Drop uint8

// What a reentrant release drops.
const (
	DropOne  Drop = iota // one hold; never frees the lock
	DropAll              // every hold: the owner's last Unlock
	DropUndo             // the hold a failed attempt took; frees the lock when none is left
)

// Forced is what a release of Shape Any says of the lock it deleted.
type Forced struct {
	Holder    string
	Reentrant bool
	Released  Released
}

// Released is what a release's reply says beyond OK. Heard is, for a
// release that freed the lock and announced it, how many clients the
// announcement reached; Named is set when it named a queued waiter, whose
// process alone heard it. Gone is set when the key was absent: it expired,
// an earlier try of the same release (resent by the client after its reply
// was lost) deleted it, or the node lost it (a restart, a failover); Taken
// when it held another's token or a value of another kind: taken from the
// caller, or taken after that earlier try freed it. Server is then the run
// id of the server that answered ("" when it did not say).
type Released struct {
	Heard  int
	Named  bool
	Gone   bool
	Taken  bool
	Server string
}

// ReleasedOf returns what rep, a release's reply, says beyond OK.
func ReleasedOf(rep Reply) Released {
	r, _ := rep.Value.(Released)
	return r
}

// Name implements Op.
func (o *Release) Name() string { return shapes[o.Shape].release }

// Lane implements Laned: the lock's name.
func (o *Release) Lane() string { return o.Key }

// Concurrent implements Concurrent, by the release's Shape.
func (o *Release) Concurrent() (string, bool) { return holder(o.Shape, o.Token) }

// Encode implements Op.
func (o *Release) Encode(l Layout, cmds []Cmd) []Cmd {
	return append(cmds, Cmd{Args: o.enc.args(l, o.args)})
}

// args is the script of o's Shape, with its keys and arguments for a node
// laid out as l.
func (o *Release) args(l Layout) []any {
	var kb [3]string // on the stack: evalArgs copies the keys
	keys := releaseKeys(kb[:0], l, o.Key, o.Channel, o.QueueKey, "")
	switch o.Shape {
	case Reentrant:
		drop := strconv.Itoa(int(o.Drop))
		if o.Queued != "" && len(keys) > 1 {
			return evalArgs(scripts.ReleaseReentrant, keys, o.Token, drop, o.Channel, o.Notice, o.Queued)
		}
		return evalArgs(scripts.ReleaseReentrant, keys, o.Token, drop, o.Channel, o.Notice)
	case Multi:
		prefix := ""
		if o.Channel != "" {
			prefix = ChannelPrefix
		}
		return evalArgs(scripts.ReleaseMulti, allKeys(o.Key, o.Also), o.Token, prefix)
	case Write:
		return o.writeArgs(releaseKeys(kb[:0], l, o.Key, o.Channel, o.QueueKey, l.Beside(o.Key, o.Intent)))
	case Read:
		return evalArgs(scripts.ReadRelease, keys, o.Token, o.Channel)
	case Semaphore:
		return evalArgs(scripts.SemRelease, o.permitKeys(l), o.Token, o.Channel)
	case Any:
		return evalArgs(scripts.ForceRelease, l.keys(o.Key, QueueKey(o.Key)), ReleaseChannel(o.Key), o.Notice)
	}
	return o.plainArgs(keys)
}

// plainArgs is release.lua's arguments for a plain lock's release with
// keys: its own queue member, and that member's score when known, only
// when the queue is among them.
func (o *Release) plainArgs(keys []string) []any {
	switch {
	case o.Queued == "" || len(keys) < 2:
		return evalArgs(scripts.Release, keys, o.Token, o.Channel)
	case o.QueuedSince > 0:
		return evalArgs(scripts.Release, keys, o.Token, o.Channel, "", o.Queued, strconv.FormatInt(o.QueuedSince, 10))
	}
	return evalArgs(scripts.Release, keys, o.Token, o.Channel, "", o.Queued)
}

// writeArgs is release.lua's arguments for a Write lock's release with
// keys: its mark's value (Writer) only when its key is among them.
func (o *Release) writeArgs(keys []string) []any {
	switch {
	case len(keys) < 3:
		return evalArgs(scripts.Release, keys, o.Token, o.Channel)
	case o.Queued != "":
		return evalArgs(scripts.Release, keys, o.Token, o.Channel, o.Writer, o.Queued)
	}
	return evalArgs(scripts.Release, keys, o.Token, o.Channel, o.Writer)
}

// permitKeys is sem_release.lua's keys for a node laid out as l: the
// semaphore, its permit count, then its queue when the release announces
// itself and the queue can be kept beside them.
func (o *Release) permitKeys(l Layout) []string {
	keys := l.keys(o.Key, PermitsKey(o.Key))
	if q := l.Beside(o.Key, o.QueueKey); o.Channel != "" && q != "" && len(keys) > 1 {
		keys = append(keys, q)
	}
	return keys
}

// releaseKeys appends to keys release.lua's keys for layout l: the lock
// key, then its queue when the release announces itself on channel and the
// queue can be kept beside the key, then mark (a writer's, "" for none)
// only when the queue is there.
func releaseKeys(keys []string, l Layout, key, channel, queueKey, mark string) []string {
	keys = append(keys, key)
	if q := l.Beside(key, queueKey); channel != "" && q != "" {
		keys = append(keys, q)
		if mark != "" {
			keys = append(keys, mark)
		}
	}
	return keys
}

// Decode implements Op: every shape's script answers as release.lua does,
// but Any's (see decodeForced).
func (o *Release) Decode(cmds []Cmd) Reply {
	if o.Shape == Any {
		return decodeForced(cmds)
	}
	return decodeRelease(cmds)
}

// decodeRelease reads the reply of release.lua and of the scripts that
// answer as it does.
func decodeRelease(cmds []Cmd) Reply {
	cmd := &cmds[0]
	if err := cmd.Err(); err != nil {
		return Reply{Err: err}
	}
	if id, ok := cmd.Val().(string); ok {
		if id, ok := strings.CutPrefix(id, "taken:"); ok {
			return Reply{Value: Released{Taken: true, Server: id}} // another's: the node's run id
		}
		return Reply{Value: Released{Gone: true, Server: id}} // the key was absent: the node's run id
	}
	v, err := cmd.Int()
	switch {
	case err != nil:
		return Reply{Err: err}
	case v > 1: // 1 + 2 × the clients the announcement reached, + 1 if it named a waiter
		return Reply{OK: true, Value: Released{Heard: int(v-1) / 2, Named: (v-1)%2 == 1}}
	case v == 0:
		return Reply{Value: Released{Gone: true}}
	}
	return Reply{OK: v == 1}
}

// Owable reports whether a release that failed with err should be
// delivered later: it may not have reached the node, and sending it again
// cannot drop more than it should (dropping a reader or a permit twice
// drops nothing more). Of a Reentrant lock, dropping one hold never frees
// the lock, so it is not worth owing, and the undo of a hold is resent only
// when it surely was not applied (resent, it could drop a hold the owner
// took since). An operator's (Any) is never owed: the operator sees its
// failure.
func (o *Release) Owable(err error) bool {
	switch {
	case !owable(err) || o.Shape == Any:
		return false
	case o.Shape != Reentrant:
		return true
	case o.Drop == DropUndo:
		return Unsent(err)
	}
	return o.Drop == DropAll
}

// owable reports whether an operation that failed with err may not have
// reached the node, and is worth sending again later.
func owable(err error) bool {
	return err != nil && (Unsent(err) || Unreachable(err)) && !errors.Is(err, ErrClosed)
}
