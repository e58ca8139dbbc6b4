package node

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
)

// Scripts run through EVALSHA; a node that lost its script cache (a
// restart) answers NOSCRIPT, and the transport falls back to EVAL, which
// loads the script again (see Redis.send).

// shas are the scripts' hashes, boxed once, and the scripts by hash.
var (
	shas        = map[*scripts.Script]any{}
	bySHA       = map[string]*scripts.Script{}
	_           = initSHAs()
	evalsha any = "evalsha"
)

func initSHAs() bool {
	for _, s := range append(scripts.All, scripts.SetFenced) {
		shas[s] = s.Hash
		bySHA[s.Hash] = s
	}
	return true
}

// evalArgs is the command EVALSHA s.Hash len(keys) keys... args...
func evalArgs(s *scripts.Script, keys []string, args ...any) []any {
	out := make([]any, 0, 3+len(keys)+len(args))
	out = append(out, evalsha, shas[s], len(keys))
	for _, k := range keys {
		out = append(out, k)
	}
	return append(out, args...)
}

// script is the command that runs s with keys and args.
func script(ctx context.Context, s *scripts.Script, keys []string, args ...any) *redis.Cmd {
	return redis.NewCmd(ctx, evalArgs(s, keys, args...)...)
}

// evalFallback returns the EVAL that replaces cmd, an EVALSHA the node
// answered NOSCRIPT, run on c; nil when cmd is no such command.
func evalFallback(ctx context.Context, c redis.Scripter, cmd redis.Cmder) redis.Cmder {
	if cmd.Err() == nil || !redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		return nil
	}
	args := cmd.Args()
	if len(args) < 3 || args[0] != evalsha {
		return nil
	}
	sha, _ := args[1].(string)
	s := bySHA[sha]
	if s == nil {
		return nil
	}
	n, _ := args[2].(int)
	keys := make([]string, 0, n)
	for _, k := range args[3 : 3+n] {
		keys = append(keys, k.(string))
	}
	return c.Eval(ctx, s.Source, keys, args[3+n:]...)
}

// encoding is an operation's command arguments, per layout (plain or
// sharded, whose keys may differ: see Layout.Beside). go-redis only reads
// a command's arguments, so the requests every node of a lock gets on the
// hot path encode them once, not once per node.
type encoding struct {
	enc [2]atomic.Pointer[[]any]
}

func kind(l Layout) int {
	if l.Sharded {
		return 1
	}
	return 0
}

// args returns the arguments kept for layout l, building them with build
// the first time (a race builds twice and keeps one).
func (e *encoding) args(l Layout, build func() []any) []any { return e.at(kind(l), build) }

// at returns the arguments kept in slot i (0 or 1), building them with
// build the first time.
func (e *encoding) at(i int, build func() []any) []any {
	p := &e.enc[i]
	if a := p.Load(); a != nil {
		return *a
	}
	args := build()
	if p.CompareAndSwap(nil, &args) {
		return args
	}
	return *p.Load()
}

// shared is the command with args, shared by the requests of one
// operation to every node of a layout.
func shared(ctx context.Context, args []any) *redis.Cmd {
	return redis.NewCmd(ctx, args...)
}
