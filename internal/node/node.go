// Package node is what one Redis master is asked and what it answers: one
// type per operation, which knows its command and how to read its reply
// (a lock's Acquire, Extend and Release, each of the lock's Shape, whose
// rules are stated once in shape.go; Fence, Inspect, Queue, Identify and
// Clock), in the protocol's own commands and replies (Cmd); the key layout
// a lock keeps beside its name; the node that sends operations in batches
// over a Transport (package goredis is go-redis'); and the classification
// of a node's errors. It knows nothing of quorums, options or observers: the
// layers above hand it operations and read replies.
package node

import (
	"context"
	"time"
)

// Node is one independent Redis master (or one cluster) as the layers above
// see it.
type Node interface {
	// Do sends op and calls done exactly once with the reply: on the node's
	// own goroutine once the reply is in, or at once, on the caller's, when
	// op cannot be sent (the queue is full, the node is closed). done must
	// not block. A request still waiting to be sent at sendBy is dropped
	// and answered with an error wrapping ErrUnsent. ctx carries values,
	// not a deadline: once sent, a request is bounded by the client's own
	// timeouts, and the caller stops waiting for it by itself.
	Do(ctx context.Context, sendBy time.Time, op Op, done func(Reply))
	// Ping asks the node whether it answers at all, within ctx, beside the
	// queue.
	Ping(ctx context.Context) error
	// Subscribe opens a subscription to the node's pub/sub channels.
	Subscribe() Subscription
	// Close stops what the node runs in the background at once: requests
	// still queued are answered with an error wrapping ErrUnsent. It
	// then waits for the round trips in progress until ctx ends, and
	// returns ctx's error if it stopped waiting first (see life.Group.Wait).
	Close(ctx context.Context) error
	// Addr names the node in errors.
	Addr() string
	// Layout says how the node keeps the keys a lock keeps beside its name.
	Layout() Layout
}

// Subscription is one pub/sub connection to a node. It reconnects and
// re-subscribes by itself; messages published while it is down are lost.
type Subscription interface {
	Subscribe(ctx context.Context, channels ...string) error
	Unsubscribe(ctx context.Context, channels ...string) error
	// Messages delivers what is published on the subscribed channels; it
	// is closed by Close.
	Messages() <-chan Message
	Close() error
}

// Message is what was published on a channel a Subscription subscribed.
type Message struct {
	Channel, Payload string
}

// Op is one request to one node. It knows the commands that carry it and
// how to read their replies, so that the transport has no case per
// operation: adding an operation adds a type, and touches nothing else;
// adding a kind of lock adds a Shape.
type Op interface {
	// Name names the operation in errors and tests.
	Name() string
	// Encode appends the commands that carry the operation to a node laid
	// out as l (none when there is nothing to send: Decode then gets none).
	Encode(l Layout, cmds []Cmd) []Cmd
	// Decode reads the replies of the commands Encode returned, once their
	// round trip is over.
	Decode(cmds []Cmd) Reply
}

// Runner is an Op that the transport runs on its own rather than in a
// pipeline: one that needs several servers (INFO on every master of a
// cluster).
type Runner interface {
	Op
	Run(ctx context.Context, t Transport) Reply
}

// Transport is how a node's commands reach its servers: go-redis' in this
// module (package goredis).
type Transport interface {
	Conn
	// Batch sends cmds, a batch of the node's calls, in one round trip,
	// and answers each; an error voids every reply (a ring whose shards
	// changed: unsent when it wraps ErrUnsent, else applied perhaps).
	// Two batches may be in flight at once.
	Batch(ctx context.Context, cmds []*Cmd) error
	// Server returns the server that keeps key (a cluster's master of its
	// slot): each Send is one round trip on a connection of its pool,
	// resent on another if the first broke, as the client resends.
	Server(ctx context.Context, key string) (Conn, error)
	// OnKey runs fn with one connection to the server that keeps key,
	// taken from the pool for fn's whole run, so that a transaction's
	// WATCH holds from one Send to the next.
	OnKey(ctx context.Context, key string, fn func(c Conn) error) error
	// Each runs fn with each server behind the node: one, or each master
	// of a cluster, and with replicas each replica too (one that may be
	// promoted); several at once.
	Each(ctx context.Context, replicas bool, fn func(c Conn) error) error
	// Subscribe opens a subscription to the node's pub/sub channels.
	Subscribe() Subscription
	// Ping asks the node whether it answers at all, within ctx.
	Ping(ctx context.Context) error
	// Addr names the node in errors.
	Addr() string
	// Sharded reports whether keys are spread over several servers by
	// slot (a cluster).
	Sharded() bool
}

// Conn sends commands to a server.
type Conn interface {
	// Send sends cmds in one round trip, in order, and answers each: the
	// server's reply, or the failure to talk to it.
	Send(ctx context.Context, cmds ...*Cmd)
}

// Reply is a node's answer to an Op. OK and Err are what every rule reads;
// Value is what the operation says beyond them, of the type its doc names
// (nil when it has nothing more to say).
type Reply struct {
	OK    bool
	Err   error
	Value any
	// Time is the node's clock right after the operation, for a Timed one
	// (see clock.go); zero otherwise, or when the node did not say.
	Time time.Time
}

// Laned is an Op about one lock name. A transport applies a node's Laned
// operations of one name in the order Do was called for them: they travel
// one lane (for Redis, one worker, whose round trips follow each other), so
// that a release handed over before the next acquisition of the same name
// lands first, and a release lands after the acquisitions it undoes.
// Operations that are not Laned, or of different names, may be applied in
// any order.
type Laned interface {
	Op
	// Lane is the lock name whose order the operation keeps.
	Lane() string
}

// Concurrent is a Laned operation that a node may apply in either order
// with the other Concurrent operations of its lane that are not its
// holder's: the grants, extensions and releases of a reader-writer lock's
// readers, which never refuse one another. One holder's operations keep
// their order (a release sent while its grant is in flight lands after
// it), and against every other operation of the name its lane keeps the
// order.
type Concurrent interface {
	Laned
	// Concurrent returns the token of the holder whose order it keeps,
	// and whether the operation is Concurrent at all: a lock's
	// operations are, or not, by their Shape.
	Concurrent() (token string, ok bool)
}

// concurrent returns op's holder's token, and whether op is Concurrent.
func concurrent(op Op) (string, bool) {
	if c, ok := op.(Concurrent); ok {
		return c.Concurrent()
	}
	return "", false
}

// LaneOf returns the name whose lane op travels, "" when it has none.
func LaneOf(op Op) string {
	if l, ok := op.(Laned); ok {
		return l.Lane()
	}
	return ""
}
