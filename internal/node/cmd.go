package node

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cmd is one command to a node, in the words of the protocol: its
// arguments (the command's name first), then, once its round trip is over,
// the node's reply, which the transport sets with Answer. Operations speak
// Cmds; only a transport knows a client library.
//
// A reply is what the server sent, read as: ErrNil for a nil reply (as the
// error); an int64; a string (a status or a bulk string); a []any of
// replies; in RESP3 also a float64, a bool or a map[any]any. A server's
// error reply is an error with a RedisError method (ServerError is one,
// go-redis' own are too), the command's Err or an element of an array; any
// other Err is a failure to talk to the node.
type Cmd struct {
	Args []any
	// Expect is the reply's shape where the caller knows it: a transport
	// may then read it without boxing it in an interface (AnswerInt,
	// AnswerText, AnswerTexts); ExpectAny otherwise.
	Expect Expect
	val    any
	err    error
	got    Expect // which of the fields below holds the reply; ExpectAny: val
	num    int64  // an integer reply, or TIME's in Unix nanoseconds (AnswerTime)
	str    string
	strs   []string
}

// Expect is the shape a command's reply is known to have.
type Expect uint8

// The shapes a reply may be known to have: an integer, a string (a status
// or a bulk string; nil as ErrNil), an array of strings.
const (
	ExpectAny Expect = iota
	ExpectInt
	ExpectText
	ExpectTexts
	expectTime // TIME's reply, read by the transport (AnswerTime)
)

// NewCmd is the command of args.
func NewCmd(args ...any) *Cmd { return &Cmd{Args: args} }

// NewText is the command of args, whose reply is a string.
func NewText(args ...any) *Cmd { return &Cmd{Args: args, Expect: ExpectText} }

// NewInt is the command of args, whose reply is an integer.
func NewInt(args ...any) *Cmd { return &Cmd{Args: args, Expect: ExpectInt} }

// NewTexts is the command of args, whose reply is an array of strings.
func NewTexts(args ...any) *Cmd { return &Cmd{Args: args, Expect: ExpectTexts} }

// refs returns pointers to each of cmds.
func refs(cmds []Cmd) []*Cmd {
	out := make([]*Cmd, len(cmds))
	for i := range cmds {
		out[i] = &cmds[i]
	}
	return out
}

// ErrNil is the Err of a nil reply (an absent key, SET NX refused, EXEC of
// a transaction a watched key aborted).
var ErrNil = errors.New("redlock: nil reply")

// ServerError is a server's error reply ("WRONGTYPE Operation against a
// key ...").
type ServerError string

func (e ServerError) Error() string { return string(e) }

// RedisError marks an error reply, as go-redis marks its own.
func (ServerError) RedisError() {}

// errorReply is a server's error reply, of any transport.
type errorReply interface {
	error
	RedisError()
}

// isReply reports whether err is the server's error reply to one command
// (the connection is fine), not a failure to talk to it.
func isReply(err error) bool {
	_, ok := replyOf(err)
	return ok
}

// replyOf returns the server's error reply in err's chain. It allocates
// only for an error that wraps others (errors.As's target escapes): it is
// asked of every reply's error.
func replyOf(err error) (string, bool) {
	switch e := err.(type) { //nolint:errorlint // the chain is read below, for a wrapper only
	case nil:
		return "", false
	case errorReply:
		return e.Error(), true
	case interface{ Unwrap() error }, interface{ Unwrap() []error }:
		var rerr errorReply
		if errors.As(err, &rerr) {
			return rerr.Error(), true
		}
	}
	return "", false
}

// says reports whether err is a server's error reply that starts with
// prefix, after an "ERR " that some servers (KVRocks) put before every
// error's own word.
func says(err error, prefix string) bool {
	msg, ok := replyOf(err)
	if !strings.HasPrefix(prefix, "ERR ") {
		msg = strings.TrimPrefix(msg, "ERR ")
	}
	return ok && strings.HasPrefix(msg, prefix)
}

// Answer sets the reply to c: v, or the error err (ErrNil for a nil reply).
func (c *Cmd) Answer(v any, err error) { c.val, c.err, c.got = v, err, ExpectAny }

// AnswerInt sets the reply to c, which Expects an integer, as read.
func (c *Cmd) AnswerInt(n int64, err error) { c.num, c.err, c.got = n, err, ExpectInt }

// AnswerText sets the reply to c, which Expects a string, as read.
func (c *Cmd) AnswerText(s string, err error) { c.str, c.err, c.got = s, err, ExpectText }

// AnswerTexts sets the reply to c, which Expects strings, as read.
func (c *Cmd) AnswerTexts(s []string, err error) { c.strs, c.err, c.got = s, err, ExpectTexts }

// AnswerTime sets the reply to c, a TIME, as a time already read: a
// transport that reads TIME itself spares the array's allocations.
func (c *Cmd) AnswerTime(t time.Time, err error) {
	c.num, c.err, c.got = t.UnixNano(), err, expectTime
}

// Name is the command's name, in lower case.
func (c *Cmd) Name() string {
	if len(c.Args) == 0 {
		return ""
	}
	s, _ := c.Args[0].(string)
	return strings.ToLower(s)
}

// Val is the reply, nil when it is an error.
func (c *Cmd) Val() any {
	switch {
	case c.err != nil:
		return nil
	case c.got == ExpectInt:
		return c.num
	case c.got == ExpectText:
		return c.str
	case c.got == ExpectTexts:
		out := make([]any, len(c.strs))
		for i, s := range c.strs {
			out[i] = s
		}
		return out
	}
	return c.val
}

// Err is the reply's error: ErrNil, a server's error reply, or a failure to
// talk to the node.
func (c *Cmd) Err() error { return c.err }

// Int reads an integer reply.
func (c *Cmd) Int() (int64, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.got == ExpectInt {
		return c.num, nil
	}
	switch v := c.Val().(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("redlock: %s answered %T, not an integer", c.Name(), c.Val())
}

// Text reads a string reply: "" and ErrNil for a nil one.
func (c *Cmd) Text() (string, error) {
	if c.err != nil {
		return "", c.err
	}
	if c.got == ExpectText {
		return c.str, nil
	}
	switch v := c.Val().(type) {
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	}
	return "", fmt.Errorf("redlock: %s answered %T, not a string", c.Name(), c.Val())
}

// Str is the string reply, "" when there is none (a nil reply, an error).
func (c *Cmd) Str() string {
	s, _ := c.Text()
	return s
}

// Num is the integer reply, 0 when there is none (a nil reply, an error).
func (c *Cmd) Num() int64 {
	n, _ := c.Int()
	return n
}

// Strs is the array of strings replied, nil when there is none.
func (c *Cmd) Strs() []string {
	s, _ := c.Texts()
	return s
}

// Slice reads an array reply.
func (c *Cmd) Slice() ([]any, error) {
	if c.err != nil {
		return nil, c.err
	}
	if v, ok := c.Val().([]any); ok {
		return v, nil
	}
	return nil, fmt.Errorf("redlock: %s answered %T, not an array", c.Name(), c.Val())
}

// StrMap reads a map of strings (CONFIG GET): a RESP3 map, or a RESP2
// array of keys and values.
func (c *Cmd) StrMap() (map[string]string, error) {
	if c.err != nil {
		return nil, c.err
	}
	out := map[string]string{}
	switch v := c.val.(type) {
	case map[any]any:
		for k, v := range v {
			ks, _ := k.(string)
			vs, _ := v.(string)
			out[ks] = vs
		}
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			ks, _ := v[i].(string)
			vs, _ := v[i+1].(string)
			out[ks] = vs
		}
	default:
		return nil, fmt.Errorf("redlock: %s answered %T, not a map", c.Name(), c.val)
	}
	return out, nil
}

// Texts reads an array of strings (ZRANGE, HKEYS).
func (c *Cmd) Texts() ([]string, error) {
	if c.got == ExpectTexts {
		return c.strs, c.err
	}
	r, err := c.Slice()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(r))
	for _, v := range r {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("redlock: %s answered %T in an array, not a string", c.Name(), v)
		}
		out = append(out, s)
	}
	return out, nil
}

// Time reads TIME's reply: seconds and microseconds.
func (c *Cmd) Time() (time.Time, error) {
	if c.err != nil {
		return time.Time{}, c.err
	}
	if c.got == expectTime {
		return time.Unix(0, c.num), nil
	}
	r, err := c.Slice()
	if err != nil {
		return time.Time{}, err
	}
	if len(r) != 2 {
		return time.Time{}, fmt.Errorf("redlock: TIME answered %d values", len(r))
	}
	var n [2]int64
	for i, v := range r {
		switch v := v.(type) {
		case int64:
			n[i] = v
		case string:
			if n[i], err = strconv.ParseInt(v, 10, 64); err != nil {
				return time.Time{}, fmt.Errorf("redlock: TIME answered %q: %w", v, err)
			}
		default:
			return time.Time{}, fmt.Errorf("redlock: TIME answered %T", v)
		}
	}
	return time.Unix(n[0], n[1]*1000), nil
}
