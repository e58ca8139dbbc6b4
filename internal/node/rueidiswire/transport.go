// Package rueidiswire is the node's transport over a rueidis client
// (github.com/redis/rueidis): each node.Cmd travels as one of the client's
// commands, pipelined as the client pipelines, and its reply comes back as
// the protocol reads it (see node.Cmd). It is what package redlockrueidis
// builds a Redlock's nodes with; package goredis is its go-redis twin.
//
// What only go-redis' transport does: it watches the client's dials, so
// that a refused dial ends the calls waiting on it at once (see
// node.Watched); here a node that refuses connections fails each call
// with the client's own dial error, and the node timeout bounds the rest.
package rueidiswire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlock-go/redlock/internal/node"
)

// Transport is the node.Transport of a rueidis client: a single server, a
// Sentinel-managed master or a Redis Cluster.
type Transport struct {
	c rueidis.Client
}

// New returns the Transport of c. No I/O.
func New(c rueidis.Client) *Transport { return &Transport{c: c} }

// NewNode returns the node of c, made as cfg says.
func NewNode(c rueidis.Client, cfg node.Config) *node.Redis { return node.NewOver(New(c), cfg) }

// Batch implements node.Transport: the commands in one round trip (the
// client's DoMulti; on a cluster, one per master the keys are kept on).
func (t *Transport) Batch(ctx context.Context, cmds []*node.Cmd) error {
	send(ctx, t.c, cmds)
	return nil
}

// Send implements node.Conn.
func (t *Transport) Send(ctx context.Context, cmds ...*node.Cmd) { send(ctx, t.c, cmds) }

// Server implements node.Transport: the client itself, which sends each
// command to the master of its key's slot.
func (t *Transport) Server(context.Context, string) (node.Conn, error) { return t, nil }

// OnKey implements node.Transport: a connection of the client's own,
// dedicated to fn's run (on a cluster, on the master of key's slot, which
// fn's first command names).
func (t *Transport) OnKey(_ context.Context, _ string, fn func(node.Conn) error) error {
	return t.c.Dedicated(func(d rueidis.DedicatedClient) error { return fn(dedicated{d}) })
}

// Each implements node.Transport: each server of a cluster the client
// knows (masters only, unless replicas), else the one server.
func (t *Transport) Each(ctx context.Context, replicas bool, fn func(node.Conn) error) error {
	if t.c.Mode() != rueidis.ClientModeCluster {
		return fn(t)
	}
	var errs []error
	for _, c := range t.c.Nodes() {
		if !replicas {
			role, err := c.Do(ctx, c.B().Arbitrary("ROLE").Build()).ToArray()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if s, _ := role[0].ToString(); s != "master" {
				continue
			}
		}
		if err := fn(&Transport{c: c}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Ping implements node.Transport.
func (t *Transport) Ping(ctx context.Context) error {
	return readErr(t.c.Do(ctx, t.c.B().Ping().Build()).Error())
}

// Addr implements node.Transport: the address of each server the client
// knows, sorted (for a Sentinel-managed client, the master it reaches).
func (t *Transport) Addr() string {
	addrs := make([]string, 0, 1)
	for a := range t.c.Nodes() {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	return strings.Join(addrs, ",")
}

// Sharded implements node.Transport: a cluster.
func (t *Transport) Sharded() bool { return t.c.Mode() == rueidis.ClientModeCluster }

// dedicated is one connection taken for a transaction.
type dedicated struct{ d rueidis.DedicatedClient }

// Send implements node.Conn.
func (d dedicated) Send(ctx context.Context, cmds ...*node.Cmd) { send(ctx, d.d, cmds) }

// doer is a client or a dedicated connection.
type doer interface {
	B() rueidis.Builder
	DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult
}

// scratch is the words of the command being built, reused.
type scratch struct{ words []string }

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// send sends cmds in one round trip on d and answers each. The commands'
// slice is the client's once given: a round trip that ctx ended is still
// written in the background, from that slice.
func send(ctx context.Context, d doer, cmds []*node.Cmd) {
	sc := scratches.Get().(*scratch)
	rcs := make([]rueidis.Completed, len(cmds))
	for i, c := range cmds {
		rcs[i] = sc.build(d.B(), c.Args)
	}
	scratches.Put(sc)
	for i, r := range d.DoMulti(ctx, rcs...) {
		answer(cmds[i], r)
	}
}

// build makes the command of args, its key marked as one (a cluster
// client routes the command by it): the first argument after the name,
// or a script's first key; none for the commands without one. The
// command copies the words it is given.
func (sc *scratch) build(b rueidis.Builder, args []any) rueidis.Completed {
	words := sc.words[:0]
	for _, a := range args {
		words = append(words, text(a))
	}
	sc.words = words
	defer clear(words)
	if k := keyAt(words); k > 0 {
		return b.Arbitrary(words[:k]...).Keys(words[k]).Args(words[k+1:]...).Build()
	}
	return b.Arbitrary(words...).Build()
}

// keyAt returns the index of the key of the command words, 0 when it has
// none.
func keyAt(words []string) int {
	if len(words) < 2 {
		return 0
	}
	switch strings.ToLower(words[0]) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		if len(words) > 3 && words[2] != "0" {
			return 3
		}
		return 0
	case "time", "info", "acl", "client", "config", "script", "publish", "pubsub", "ping", "multi",
		"exec", "discard", "unwatch", "role", "hello", "wait", "waitaof", "cluster", "function", "dbsize",
		"command", "debug", "memory", "lastsave", "echo":
		return 0
	}
	return 1
}

// text writes an argument as the protocol carries it (the node's
// arguments are strings and integers; anything else as go-redis writes
// it, but for bools, which the node never sends).
func text(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case time.Duration:
		return strconv.FormatInt(int64(v), 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(a)
}

// answer copies r, the reply to c, into c.
func answer(c *node.Cmd, r rueidis.RedisResult) {
	m, err := r.ToMessage()
	if err != nil {
		c.Answer(nil, readErr(err))
		return
	}
	switch {
	case c.Expect == node.ExpectInt:
		n, err := m.AsInt64()
		c.AnswerInt(n, err)
	case c.Expect == node.ExpectText:
		s, err := m.ToString()
		c.AnswerText(s, err)
	case c.Expect == node.ExpectTexts:
		s, err := m.AsStrSlice()
		c.AnswerTexts(s, err)
	case c.Name() == "time" && len(c.Args) == 1:
		c.AnswerTime(timeOf(&m))
	default:
		c.Answer(value(&m))
	}
}

// timeOf reads TIME's reply: seconds and microseconds.
func timeOf(m *rueidis.RedisMessage) (time.Time, error) {
	s, err := m.AsIntSlice()
	if err != nil {
		return time.Time{}, err
	}
	if len(s) != 2 {
		return time.Time{}, fmt.Errorf("redlock: TIME answered %d values", len(s))
	}
	return time.Unix(s[0], s[1]*1000), nil
}

// value reads m as node.Cmd holds a reply: an int64, a string, a []any, a
// map[any]any, a float64 or a bool; ErrNil for a nil reply, a
// node.ServerError for an error reply (an element of an array included).
func value(m *rueidis.RedisMessage) (any, error) {
	if err := m.Error(); err != nil {
		return nil, readErr(err)
	}
	switch {
	case m.IsInt64():
		return m.AsInt64()
	case m.IsString():
		return m.ToString()
	case m.IsFloat64():
		return m.AsFloat64()
	case m.IsBool():
		return m.AsBool()
	case m.IsArray():
		return array(m), nil
	case m.IsMap():
		return mapOf(m)
	}
	// A RESP3 verbatim string (INFO), a big number: as text.
	return m.ToString()
}

// readErr is err as node reads a reply's error: ErrNil for a nil reply; a
// node.ServerError for the server's error reply, with the "ERR " rueidis
// takes off put back (node reads "ERR unknown command" as such); any other
// error, a failure to talk to the server, as it is.
func readErr(err error) error {
	if err == nil {
		return nil
	}
	if rueidis.IsRedisNil(err) {
		return node.ErrNil
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		if word, _, _ := strings.Cut(msg, " "); word != strings.ToUpper(word) {
			msg = "ERR " + msg // rueidis cut it: an error code is a word in capitals
		}
		return node.ServerError(msg)
	}
	return err
}

// array reads an array reply: a nil element as nil, an error reply as a
// node.ServerError.
func array(m *rueidis.RedisMessage) []any {
	ms, _ := m.ToArray()
	out := make([]any, len(ms))
	for i := range ms {
		v, err := value(&ms[i])
		switch {
		case errors.Is(err, node.ErrNil):
			out[i] = nil
		case err != nil:
			out[i] = err
		default:
			out[i] = v
		}
	}
	return out
}

// mapOf reads a RESP3 map reply.
func mapOf(m *rueidis.RedisMessage) (map[any]any, error) {
	ms, err := m.ToMap()
	if err != nil {
		return nil, err
	}
	out := make(map[any]any, len(ms))
	for k, e := range ms {
		out[k], _ = value(&e)
	}
	return out, nil
}
