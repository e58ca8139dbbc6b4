package node

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The native encodings that miniredis cannot run (it has no SET ... IFEQ
// and no DELIFEQ): which command each way and capability sends, and how
// each reply a server gives is read, as the operation's script answers
// (acquire_plain.lua, extend.lua, release.lua). The replies were read from
// Redis 8.6, Valkey 8.1 and Valkey 9.1 (see docs/DEPLOYMENTS.md); what
// miniredis runs is held to the cases of package conformance in TestWaysAnswerAsTheCases.

// nativeArgs returns the commands op sends natively to a node that speaks
// s, nil when it has none there.
func nativeArgs(t *testing.T, op nativeOp, s speech) [][]any {
	t.Helper()
	cmds, ok := op.encodeNative(s, nil)
	if !ok {
		require.Empty(t, cmds)
		return nil
	}
	out := make([][]any, len(cmds))
	for i, c := range cmds {
		out[i] = c.Args
	}
	return out
}

func TestNativeEncodings(t *testing.T) {
	all := Caps{Known: true, SetIfEq: true, DelIfEq: true, DelEx: true}
	valkey9 := Caps{Known: true, SetIfEq: true, DelIfEq: true}
	redis8 := Caps{Known: true, SetIfEq: true, DelEx: true}
	redis7 := Caps{Known: true, Server: "redis", Version: "7.0.15"}
	acquire := func() *Acquire { return &Acquire{Key: "k", Token: "t", TTL: time.Second} }
	extend := func() *Extend { return &Extend{Key: "k", Token: "t", TTL: time.Second} }
	release := func() *Release { return &Release{Key: "k", Token: "t", Channel: "ch"} }
	set := []any{"set", "k", "t", "nx", "get", "px", int64(1000)}
	setIfEq := []any{"set", "k", "t", "ifeq", "t", "px", int64(1000)}
	pub := []any{"publish", "ch", "t|"}
	exists := []any{"exists", "k"}
	for _, c := range []struct {
		name string
		op   func() nativeOp
		s    speech
		want [][]any
	}{
		{"grant, transactions", func() nativeOp { return acquire() }, speech{way: Transactions}, [][]any{set}},
		{"grant, scripts without SET IFEQ", func() nativeOp { return acquire() }, speech{way: Scripts, caps: Caps{Known: true, DelEx: true}}, nil},
		{"grant beside scripts", func() nativeOp { return acquire() }, speech{way: Scripts, caps: redis8}, [][]any{set}},
		{"grant beside scripts, Redis 7.0", func() nativeOp { return acquire() }, speech{way: Scripts, caps: redis7}, [][]any{set}},
		{"grant, scripts on Redis 6.2", func() nativeOp { return acquire() }, speech{way: Scripts, caps: Caps{Known: true, Server: "redis", Version: "6.2.14"}}, nil},
		{"extension, scripts on Redis 7.0", func() nativeOp { return extend() }, speech{way: Scripts, caps: redis7}, nil},
		{"fenced grant", func() nativeOp { a := acquire(); a.FenceKey = "f"; return a }, speech{way: Native, caps: all}, nil},
		{"restart-delayed grant", func() nativeOp { a := acquire(); a.MinUptime = 5; return a }, speech{way: Native, caps: all}, nil},
		{"grant with WAIT", func() nativeOp { a := acquire(); a.Ack = Ack{Replicas: 1, Timeout: time.Second}; return a },
			speech{way: Native, caps: all}, [][]any{set, {"wait", 1, int64(1000)}}},
		{"extension, transactions", func() nativeOp { return extend() }, speech{way: Transactions, caps: all}, nil},
		{"extension, Valkey 8.0", func() nativeOp { return extend() }, speech{way: Native, caps: Caps{Known: true}}, nil},
		{"extension, native", func() nativeOp { return extend() }, speech{way: Native, caps: valkey9}, [][]any{setIfEq}},
		{"extension beside scripts", func() nativeOp { return extend() }, speech{way: Scripts, caps: valkey9}, [][]any{setIfEq}},
		{"release, Valkey 9", func() nativeOp { return release() }, speech{way: Native, caps: valkey9}, [][]any{{"delifeq", "k", "t"}, pub, exists}},
		{"release, Redis 8.4", func() nativeOp { return release() }, speech{way: Native, caps: redis8}, [][]any{{"delex", "k", "ifeq", "t"}, pub, exists}},
		{"release, set Native without a probe", func() nativeOp { return release() }, speech{way: Native}, [][]any{{"delex", "k", "ifeq", "t"}, pub, exists}},
		{"release, Valkey 8.1", func() nativeOp { return release() }, speech{way: Native, caps: Caps{Known: true, SetIfEq: true}}, nil},
		{"release beside scripts", func() nativeOp { return release() }, speech{way: Scripts, caps: all}, nil},
		{"undo", func() nativeOp { return &Release{Key: "k", Token: "t"} }, speech{way: Native, caps: valkey9}, [][]any{{"delifeq", "k", "t"}, exists}},
	} {
		t.Run(c.name, func(t *testing.T) { assert.Equal(t, c.want, nativeArgs(t, c.op(), c.s)) })
	}
}

// Only a plain lock's operations have the server's own commands: every
// other kind keeps its script or transaction.
func TestOnlyPlainLockOpsAreNative(t *testing.T) {
	all := speech{way: Native, caps: Caps{Known: true, Server: "valkey", SetIfEq: true, DelIfEq: true, DelEx: true}}
	for _, op := range []nativeOp{&Acquire{}, &Extend{}, &Release{}} {
		assert.NotNil(t, nativeArgs(t, op, all), op.Name())
	}
	for _, op := range []Op{
		&Acquire{Shape: Reentrant}, &Extend{Shape: Reentrant}, &Release{Shape: Reentrant}, &Fence{},
		&Acquire{Shape: Multi}, &Extend{Shape: Multi}, &Release{Shape: Multi}, &Acquire{Shape: Write}, &Release{Shape: Write},
		&Extend{Shape: Read}, &Extend{Shape: Semaphore},
	} {
		if n, ok := op.(nativeOp); ok {
			assert.Nil(t, nativeArgs(t, n, all), op.Name())
		}
	}
}

// answered is a command answered v: an error, or a value.
func answered(v any) Cmd {
	var cmd Cmd
	if err, ok := v.(error); ok {
		cmd.Answer(nil, err)
	} else {
		cmd.Answer(v, nil)
	}
	return cmd
}

func TestNativeReplies(t *testing.T) {
	wrongType := replyError("WRONGTYPE Operation against a key holding the wrong kind of value")
	down := errors.New("i/o timeout")
	a := &Acquire{Key: "k", Token: "t", TTL: time.Second}
	e := &Extend{Key: "k", Token: "t", TTL: time.Second}
	r := &Release{Key: "k", Token: "t", Channel: "ch"}
	cmd, num := answered, answered
	for _, c := range []struct {
		name string
		op   nativeOp
		cmds []Cmd
		want Reply
		more bool // the reply asks more on a connection of its own
	}{
		{"grant", a, []Cmd{cmd(ErrNil)}, Reply{OK: true}, false},
		{"grant resent or handed over: re-armed", a, []Cmd{cmd("t")}, Reply{}, true},
		{"held by another", a, []Cmd{cmd("u")}, Reply{Value: Grant{Holder: "u"}}, false},
		{"grant on another type", a, []Cmd{cmd(wrongType)}, Reply{}, true},
		{"grant, node down", a, []Cmd{cmd(down)}, Reply{Err: down}, false},
		{"extended", e, []Cmd{cmd("OK")}, Reply{OK: true}, false},
		{"extension of another's", e, []Cmd{cmd(ErrNil)}, Reply{}, false},
		{"extension of another type", e, []Cmd{cmd(wrongType)}, Reply{}, false},
		{"extension, node down", e, []Cmd{cmd(down)}, Reply{Err: down}, false},
		{"released, heard by two", r, []Cmd{num(int64(1)), num(int64(2)), num(int64(0))}, Reply{OK: true, Value: Released{Heard: 2}}, false},
		{"released, heard by none", r, []Cmd{num(int64(1)), num(int64(0)), num(int64(0))}, Reply{OK: true}, false},
		{"nothing deleted, another's", r, []Cmd{num(int64(0)), num(int64(0)), num(int64(1))}, Reply{Value: absent{other: true}}, false},
		{"undo deleted nothing, another's", &Release{Key: "k", Token: "t"}, []Cmd{num(int64(0)), num(int64(1))}, Reply{}, false},
		{"undo deleted nothing, no key", &Release{Key: "k", Token: "t"}, []Cmd{num(int64(0)), num(int64(0))}, Reply{Value: Released{Gone: true}}, false},
		{"nothing deleted, no key", r, []Cmd{num(int64(0)), num(int64(0)), num(int64(0))}, Reply{Value: absent{}}, false},
		{"release of another type", r, []Cmd{num(wrongType), num(int64(0)), num(int64(1))}, Reply{}, true},
		{"release, node down", r, []Cmd{num(down), num(down), num(down)}, Reply{Err: down}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, more := c.op.decodeNative(c.cmds)
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.more, more != nil, "asks more")
		})
	}
}

// A batch without scripts: the native calls share the pipeline (their
// order kept per name), a release leads it, each release reads EXISTS of
// its key right after its delete, and the rest goes to the transactions.
func TestPipelinable(t *testing.T) {
	s := speech{way: Native, caps: Caps{Known: true, SetIfEq: true, DelIfEq: true}}
	native := func(op nativeOp) *call {
		cmds, ok := op.encodeNative(s, nil)
		require.True(t, ok)
		return &call{op: op, cmds: cmds, native: true}
	}
	grantC := native(&Acquire{Key: "c", Token: "t", TTL: time.Second})
	releaseA := native(&Release{Key: "a", Token: "t", Channel: "ch"})
	grantA := native(&Acquire{Key: "a", Token: "u", TTL: time.Second})
	releaseB := native(&Release{Key: "b", Token: "t", Channel: "ch"})
	fenced := &call{op: &Acquire{Key: "e", Token: "t", TTL: time.Second, FenceKey: "f"}}
	extendD := native(&Extend{Key: "d", Token: "t", TTL: time.Second})

	pipelined, rest := pipelinable([]*call{grantC, releaseA, grantA, fenced, extendD, releaseB})
	assert.Equal(t, []*call{releaseA, grantC, grantA, extendD, releaseB}, pipelined,
		"the first release whose name has no call before it leads; a's grant stays after a's release")
	assert.Equal(t, []*call{fenced}, rest)
	for _, r := range []*call{releaseA, releaseB} {
		require.Len(t, r.cmds, 3, "delete, announce, EXISTS")
		assert.Equal(t, "exists", r.cmds[2].Name())
	}
}

// SET ... NX GET is Redis 7.0's and every Valkey's; a server that does not
// say what it is has it only where it has SET IFEQ.
func TestCapsSetNXGet(t *testing.T) {
	for _, c := range []struct {
		caps Caps
		want bool
	}{
		{Caps{Known: true, Server: "redis", Version: "7.0.15"}, true},
		{Caps{Known: true, Server: "redis", Version: "8.6.0"}, true},
		{Caps{Known: true, Server: "redis", Version: "6.2.14"}, false},
		{Caps{Known: true, Server: "redis", Version: "garbage"}, false},
		{Caps{Known: true, Server: "valkey", Version: "8.0.1"}, true},
		{Caps{Known: true}, false},
		{Caps{Known: true, SetIfEq: true}, true},
		{Caps{}, false},
	} {
		assert.Equal(t, c.want, c.caps.SetNXGet(), "%+v", c.caps)
	}
}
