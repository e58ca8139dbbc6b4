package node

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// The go-redis side of a round trip: each Cmd travels as a go-redis
// command, whose reply is copied back (go-redis' nil reply as ErrNil; its
// error replies already carry RedisError).

// goRedis is the Transport of a go-redis client.
type goRedis struct {
	c redis.UniversalClient
}

// Send implements Transport: a pipeline of the client's (one command
// alone, as go-redis sends it).
func (g goRedis) Send(ctx context.Context, cmds ...*Cmd) {
	var w wire
	w.send(ctx, g.c, g.c.Pipeline(), cmds)
}

// OnKey implements Transport: the connection of go-redis' Watch, with no
// key watched yet, on the server that keeps key.
func (g goRedis) OnKey(ctx context.Context, key string, fn func(Conn) error) error {
	c, err := g.server(ctx, key)
	if err != nil {
		return err
	}
	return c.Watch(ctx, func(tx *redis.Tx) error { return fn(txConn{tx}) })
}

// Each implements Transport: every master of a cluster, every shard of a
// ring, else the one server.
func (g goRedis) Each(ctx context.Context, fn func(Conn) error) error {
	each := func(_ context.Context, c *redis.Client) error { return fn(goRedis{c}) }
	switch c := g.c.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, each)
	case *redis.Ring:
		return c.ForEachShard(ctx, each)
	}
	return fn(g)
}

// server returns the client of the one server that keeps key.
func (g goRedis) server(ctx context.Context, key string) (*redis.Client, error) {
	switch c := g.c.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Ring:
		return c.GetShardClientForKey(key)
	}
	return nil, fmt.Errorf("%w: a client of type %T cannot run transactions", ErrMisconfigured, g.c)
}

// txConn is one connection taken for a transaction.
type txConn struct{ tx *redis.Tx }

// Send implements Conn.
func (t txConn) Send(ctx context.Context, cmds ...*Cmd) {
	var w wire
	w.exec(ctx, t.tx, cmds)
}

// wire carries Cmds over go-redis, reusing its buffers from one round trip
// to the next (a worker's: one goroutine).
type wire struct {
	rcs []*redis.Cmd
}

// pipeliner is what sends a pipeline: a client, or a connection taken for
// a transaction.
type pipeliner interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// processor sends one command.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// exec sends cmds in one round trip on p and answers each.
func (w *wire) exec(ctx context.Context, p pipeliner, cmds []*Cmd) {
	w.prepare(ctx, cmds)
	_, err := p.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, rc := range w.rcs {
			_ = pipe.Process(ctx, rc)
		}
		return nil
	})
	unanswered(w.rcs, err)
	w.answer(cmds)
}

// send is exec on a pipeline of the worker's own (pipe, reused), or, for
// one command, c's Process.
func (w *wire) send(ctx context.Context, c processor, pipe redis.Pipeliner, cmds []*Cmd) {
	w.prepare(ctx, cmds)
	if len(w.rcs) == 1 {
		_ = c.Process(ctx, w.rcs[0])
	} else {
		for _, rc := range w.rcs {
			_ = pipe.Process(ctx, rc)
		}
		_, err := pipe.Exec(ctx)
		unanswered(w.rcs, err) // each command keeps its own error
	}
	w.answer(cmds)
}

func (w *wire) prepare(ctx context.Context, cmds []*Cmd) {
	w.rcs = slices.Grow(w.rcs[:0], len(cmds))
	for _, c := range cmds {
		w.rcs = append(w.rcs, redis.NewCmd(ctx, c.Args...))
	}
}

func (w *wire) answer(cmds []*Cmd) {
	for i, c := range cmds {
		answerFrom(c, w.rcs[i])
		w.rcs[i] = nil
	}
	w.rcs = w.rcs[:0]
}

// answerFrom copies rc's reply into c.
func answerFrom(c *Cmd, rc *redis.Cmd) {
	v, err := rc.Result()
	if err == redis.Nil { //nolint:errorlint // go-redis returns redis.Nil itself
		err = ErrNil
	}
	c.Answer(v, err)
}

// unanswered puts err, the error a pipeline's Exec returned, on every
// command of cmds when none carries an error of its own. go-redis puts a
// pipeline's failure on its commands, except an error reply met while it
// set up the connection: WRONGPASS or NOAUTH to the HELLO or AUTH it sends
// on a new connection. The commands, never sent, then look answered with
// nothing (a nil reply and no error). When one command carries an error,
// the pipeline ran, or go-redis failed each of its commands: every
// command's own reply stands. Call it after every pipeline.
func unanswered[C redis.Cmder](cmds []C, err error) {
	if err == nil || slices.ContainsFunc(cmds, func(c C) bool { return c.Err() != nil }) {
		return
	}
	for _, c := range cmds {
		c.SetErr(err)
	}
}
