package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// What the algorithm asks of one node, and what it gets back. The algorithm
// (quorum.go) sends each node one request per step through [node.do]; the
// transport (pool.go for go-redis, fakes in tests) answers through a
// callback. Health, ordering and owed releases sit in between (health.go).

// op is one request to one node: one of the request types below.
type op interface {
	// name names the operation in errors and tests.
	name() string
}

// acquireReq takes the lock: it sets key to token with the TTL if key does
// not exist (a reentrant lock also takes one more hold when token already
// owns it). A node answers ok when key now holds token, including when an
// earlier try of the same command, resent by the client, had set it;
// otherwise it says, where it can, which value holds key.
type acquireReq struct {
	key string
	// token is the acquisition's random token, or for a reentrant lock the
	// owner id of the Mutex.
	token     string
	ttl       time.Duration
	reentrant bool
	// reenter marks a reentrant acquisition by an owner that already holds
	// the lock: it never creates the key.
	reenter bool
	// fenceKey is the name's fencing counter, "" when the lock is not
	// fenced: the node then reads it in the same atomic step. It is the
	// key's name + a suffix, which a node may rename (see inSlot).
	fenceKey string
	// minUptime, when positive, is the least uptime in whole seconds at
	// which a node may grant (see WithRestartDelay); a node up for less
	// changes nothing and answers an error wrapping ErrNodeRecovering.
	minUptime int64
	enc       encoding // the command, encoded once for every node
}

// fenceReq raises the name's fencing counter to fence (never lowers it) and
// asks whether key still holds token.
type fenceReq struct {
	key, token, fenceKey string
	fence                uint64
	reentrant            bool
}

// releaseReq deletes key if it holds token (a reentrant lock drops one hold,
// all of them, or the hold of a failed attempt, see drop). A node answers ok
// when key held token.
type releaseReq struct {
	key, token string
	reentrant  bool
	drop       dropMode
	// channel is where a release that frees the lock announces it, so that
	// waiters try again at once; "" announces nothing. notice is the
	// payload, unique to the release (a reentrant token repeats). The
	// announcement also names the oldest waiter of queueKey, popped from it
	// (key's name + a suffix: see inSlot).
	channel, notice, queueKey string
	enc                       encoding // the command, encoded once for every node
}

// dropMode says what a reentrant release drops.
type dropMode uint8

const (
	dropOne  dropMode = iota // one hold; never frees the lock
	dropAll                  // every hold: the owner's last Unlock
	dropUndo                 // the hold a failed attempt took; frees the lock when none is left
)

// extendReq sets key's time to live if key holds token; it never creates
// key.
type extendReq struct {
	key, token string
	ttl        time.Duration
	reentrant  bool
	enc        encoding // the command, encoded once for every node
}

// queueReq adds a waiting Lock to the lock's queue of waiters (ZADD NX:
// a waiter queued again keeps its place), removes it, or, with ttl set,
// sets the queue's time to live, so that a queue nobody waits on goes away
// (see notify.go).
type queueReq struct {
	// key is the queue's key, lock's name + a suffix (see inSlot).
	lock, key, member string
	score             int64 // when the waiter started waiting, in Unix milliseconds
	ttl               time.Duration
	remove            bool
}

func (*acquireReq) name() string { return "acquire" }
func (*fenceReq) name() string   { return "fence" }
func (*releaseReq) name() string { return "release" }
func (*extendReq) name() string  { return "extend" }
func (*queueReq) name() string   { return "queue" }

// reply is a node's answer to an op.
type reply struct {
	ok bool
	// counter is the fencing counter an acquireReq read (0 when not fenced).
	counter uint64
	// holder is the value an acquireReq found holding the key when it was
	// refused, when the node said ("" when unknown).
	holder string
	// heard is, for a release that freed the lock and announced it, how
	// many clients the announcement reached; named is set when it named a
	// queued waiter, whose process alone heard it.
	heard int
	named bool
	// gone is set when a release found the key absent: it expired, or an
	// earlier try of the same release, resent by the client after its
	// reply was lost, deleted it, or the node lost it (a restart, a
	// failover). server is then the run id of the server that answered
	// ("" when it did not say): the same server the lock was taken on
	// tells a resend from a loss (see Redlock.release).
	gone   bool
	server string
	// state is a node's answer to an inspectReq (see inspect.go).
	state *keyState
	err   error
}

// node is one independent Redis master as the algorithm sees it.
type node interface {
	// do sends o and calls done exactly once with the reply: on the node's
	// own goroutine once the reply is in, or at once, on the caller's, when
	// o cannot be sent (the queue is full, the node is closed). done must
	// not block. A request still waiting to be sent at sendBy is dropped
	// and answered errUnsent. ctx carries values, not a deadline: once
	// sent, a request is bounded by the client's own timeouts, and the
	// algorithm stops waiting for it at the node timeout by itself.
	do(ctx context.Context, sendBy time.Time, o op, done func(reply))
	// ping asks the node whether it answers at all, within ctx.
	ping(ctx context.Context) error
	// subscribe opens a subscription to the node's pub/sub channels.
	subscribe() subscription
	// close stops what the node runs in the background; requests still
	// queued are answered errUnsent.
	close()
	// addr names the node in errors.
	addr() string
	// identify returns ids unique to the server processes behind the node
	// (several for a cluster), to find two nodes that are the same servers.
	identify(ctx context.Context) ([]string, error)
}

// subscription is one pub/sub connection to a node. It reconnects and
// re-subscribes by itself; messages published while it is down are lost.
type subscription interface {
	subscribe(ctx context.Context, channels ...string) error
	unsubscribe(ctx context.Context, channels ...string) error
	// messages delivers what is published on the subscribed channels; it is
	// closed by close.
	messages() <-chan *redis.Message
	close() error
}
