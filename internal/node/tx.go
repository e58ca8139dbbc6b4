package node

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Operations without scripts. A node that refuses scripts carries each
// operation that has a way without them (Transacted) in one of three
// shapes, the cheapest that is atomic:
//
//   - one command that does the whole job (SET key token NX GET PX ttl);
//   - MULTI ... EXEC with no WATCH, when the writes do not depend on what
//     is read (a fenced grant reads the counter in the same step);
//   - an optimistic transaction: WATCH of the keys the decision reads and
//     the reads, in one round trip; then MULTI, the writes, EXEC (and what
//     follows them: the announcement, WAIT), in a second. EXEC answers nil
//     when a watched key changed in between: nothing was applied, and the
//     transaction starts again, until the node timeout. A decision that
//     writes nothing drops the watch (UNWATCH, a third round trip).
//
// Every shape runs on one connection of the server that keeps the key,
// taken for the operation, so that a reply lost with its connection is
// never resent on another without its WATCH (go-redis does not retry a
// transaction's broken connection).

// Transacted is an Op that can be carried without scripts.
type Transacted interface {
	Op
	// Transact runs the operation on t and returns its reply, as Decode
	// would have read the script's.
	Transact(ctx context.Context, t *Tx) Reply
}

// Tx is a node spoken to without scripts, for one operation.
type Tx struct {
	via    Transport
	layout Layout
	speech
	// until is when an operation stops starting transactions again (its
	// node timeout, sendBy).
	until time.Time
	now   func() time.Time
}

// Layout is how the node keeps the keys beside a name.
func (t *Tx) Layout() Layout { return t.layout }

// Native reports whether the node speaks the server's own commands.
func (t *Tx) Native() bool { return t.way == Native }

// tx is the node spoken to without scripts in way w, for an operation
// whose node timeout passes at until.
func (n *Redis) tx(w Way, until time.Time) *Tx {
	return &Tx{via: n.via, layout: n.layout, speech: speech{way: w, caps: n.Caps()}, until: until, now: n.now}
}

// Pipelined sends cmds in one round trip on a connection to the server
// that keeps key: commands that need no transaction (a lone SET NX GET PX,
// the waiters' queue), followed by WAIT when asked. Each command keeps its
// own reply; the error is only that of finding the server.
func (t *Tx) Pipelined(ctx context.Context, key string, cmds ...*Cmd) error {
	c, err := t.via.Server(ctx, key)
	if err != nil {
		return err
	}
	c.Send(ctx, cmds...)
	return nil
}

// Step is one try of an optimistic transaction (see Tx.Watch).
type Step struct {
	conn    Conn
	watched bool
	wrote   bool
}

// Read sends cmds in one round trip, after the WATCH of keys (none: no
// WATCH). It returns a failure to talk to the node, or the WATCH's error;
// each command keeps its own reply.
func (s *Step) Read(ctx context.Context, keys []string, cmds ...*Cmd) error {
	var watch *Cmd
	if len(keys) > 0 {
		watch = NewText(watchArgs(keys)...)
		cmds = append([]*Cmd{watch}, cmds...)
	}
	s.conn.Send(ctx, cmds...)
	if watch != nil {
		s.watched = true // even when it failed: Watch then unwatches, or drops the connection
		if err := watch.Err(); err != nil {
			return err
		}
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil && err != ErrNil && !isReply(err) { //nolint:errorlint // ErrNil is never wrapped
			return err // the connection failed: the rest are unread
		}
	}
	return nil
}

// Exec sends MULTI, the writes, EXEC, then after (outside the transaction,
// on the same connection) in one round trip, and returns EXEC's results,
// one per write. It returns errRetry when a watched key changed: nothing
// was applied.
func (s *Step) Exec(ctx context.Context, writes [][]any, after ...*Cmd) ([]any, error) {
	s.wrote = true
	cmds := make([]Cmd, 0, len(writes)+2)
	cmds = append(cmds, Cmd{Args: []any{"multi"}, Expect: ExpectText})
	for _, w := range writes {
		cmds = append(cmds, Cmd{Args: w, Expect: ExpectText}) // QUEUED
	}
	cmds = append(cmds, Cmd{Args: []any{"exec"}})
	s.conn.Send(ctx, append(refs(cmds), after...)...)
	exec := &cmds[len(cmds)-1]
	res, err := exec.Slice()
	switch {
	case err == ErrNil: //nolint:errorlint // ErrNil is never wrapped
		return nil, errRetry
	case err != nil:
		return nil, err
	case len(res) != len(writes):
		return nil, fmt.Errorf("redlock: EXEC answered %d results for %d commands", len(res), len(writes))
	}
	return res, nil
}

// errRetry is a transaction that EXEC refused: a watched key changed.
var errRetry = errors.New("redlock: a watched key changed")

// Watch runs try, an optimistic transaction on the server that keeps key,
// until it returns anything but errRetry or the node timeout passes (then
// it answers an error wrapping ErrAborted). try reads with Step.Read
// (which watches) and writes with Step.Exec; a try that read and wrote
// nothing has its watch dropped.
func (t *Tx) Watch(ctx context.Context, key string, try func(s *Step) (Reply, error)) Reply {
	for {
		var rep Reply
		err := t.via.OnKey(ctx, key, func(c Conn) error {
			s := &Step{conn: c}
			var err error
			rep, err = try(s)
			if s.watched && !s.wrote {
				// No EXEC dropped the watch: the connection goes back
				// to the pool, and must not carry it to its next user.
				unwatch := NewText("unwatch")
				if c.Send(ctx, unwatch); err == nil {
					err = unwatch.Err()
				}
			}
			return err
		})
		switch {
		case errors.Is(err, errRetry):
			if t.now().Before(t.until) {
				continue
			}
			return Reply{Err: ErrAborted}
		case err != nil:
			return Reply{Err: err}
		}
		return rep
	}
}

// Multi sends MULTI, the writes, EXEC and after in one round trip on the
// server that keeps key, with no WATCH: for writes that depend on nothing
// read, made atomic with the reads among them.
func (t *Tx) Multi(ctx context.Context, key string, writes [][]any, after ...*Cmd) ([]any, error) {
	var res []any
	err := t.via.OnKey(ctx, key, func(c Conn) error {
		var err error
		res, err = (&Step{conn: c}).Exec(ctx, writes, after...)
		return err
	})
	return res, err
}

func watchArgs(keys []string) []any {
	out := make([]any, 0, 1+len(keys))
	out = append(out, "watch")
	for _, k := range keys {
		out = append(out, k)
	}
	return out
}

// replyErr returns v, one result of EXEC, as an error when it is the
// server's error reply.
func replyErr(v any) error {
	if err, ok := v.(error); ok {
		return err
	}
	return nil
}

// text returns v, one result of EXEC or a read, as a string; ok is false
// when it is nil (an absent key) or not a string.
func text(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}
