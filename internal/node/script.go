package node

import (
	"context"
	"sync/atomic"
	"time"

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
func script(s *scripts.Script, keys []string, args ...any) Cmd {
	return Cmd{Args: evalArgs(s, keys, args...)}
}

// reload runs again, as EVAL (which loads the script), each EVALSHA of
// one call's cmds that the node answered NOSCRIPT (it lost its script
// cache: a restart, a failover), and replaces it with its EVAL. A WAIT
// that followed such a script in cmds ran after nothing was written, and
// would vouch for a write it never waited for: it is sent again after the
// EVALs, in the same pipeline (one connection, whose last write it waits
// for), and replaces the first. It reports whether there was any.
func reload(ctx context.Context, c Conn, cmds []Cmd) bool {
	var again []*Cmd
	wait := -1
	for i := range cmds {
		if again != nil && cmds[i].Name() == "wait" {
			wait = i
		}
		eval, ok := evalOf(&cmds[i])
		if !ok {
			continue
		}
		cmds[i] = eval
		again = append(again, &cmds[i])
	}
	if again == nil {
		return false
	}
	if wait >= 0 {
		cmds[wait] = Cmd{Args: cmds[wait].Args, Expect: cmds[wait].Expect}
		again = append(again, &cmds[wait])
	}
	c.Send(ctx, again...) // each command keeps its own error
	return true
}

// evalOf returns the EVAL that replaces cmd, an EVALSHA the node answered
// NOSCRIPT; ok is false when cmd is no such command.
func evalOf(cmd *Cmd) (eval Cmd, ok bool) {
	if !says(cmd.Err(), "NOSCRIPT") {
		return Cmd{}, false
	}
	return asEval(cmd)
}

// spellOut replaces each EVALSHA of cmds, not sent yet, with its EVAL.
func spellOut(cmds []Cmd) {
	for i := range cmds {
		if eval, ok := asEval(&cmds[i]); ok {
			cmds[i] = eval
		}
	}
}

// asEval returns the EVAL that runs what cmd runs, when cmd is an EVALSHA
// of one of the scripts; ok is false otherwise.
func asEval(cmd *Cmd) (eval Cmd, ok bool) {
	args := cmd.Args
	if len(args) < 3 || args[0] != evalsha {
		return Cmd{}, false
	}
	sha, _ := args[1].(string)
	s := bySHA[sha]
	if s == nil {
		return Cmd{}, false
	}
	n, _ := args[2].(int)
	out := make([]any, 0, len(args))
	out = append(out, "eval", s.Source, n)
	return Cmd{Args: append(out, args[3:]...)}, true
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
func (e *encoding) args(l Layout, build func(Layout) []any) []any {
	return e.at(kind(l), func() []any { return build(l) })
}

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

// loadScripts loads every script into the node's cache, on a goroutine
// of its own, unless a load is under way; cached is set when it
// succeeded. Until then a script may answer NOSCRIPT and run again as
// EVAL after the batch it came in: a later call of the same name in that
// batch would overtake it, so send spells such calls out as EVAL (see
// evalAhead).
func (n *Redis) loadScripts() {
	if !n.loading.CompareAndSwap(false, true) {
		return
	}
	n.life.Go(func() {
		defer n.loading.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		// Close must not wait out a silent node's timeout. The watcher
		// ends with the load (cancel) or the node's stop, and Close waits.
		n.life.Go(func() {
			select {
			case <-n.life.Closing():
				cancel()
			case <-ctx.Done():
			}
		})
		// One script per round trip: a server compiles each as it loads
		// it, and other requests wait meanwhile. A Cluster's or a Ring's
		// SCRIPT LOAD goes to every shard, replicas included: one promoted
		// by a failover has them.
		err := n.via.Each(ctx, true, func(c Conn) error {
			for _, s := range scripts.All {
				load := NewCmd("script", "load", s.Source)
				if c.Send(ctx, load); load.Err() != nil {
					return load.Err()
				}
			}
			return nil
		})
		if err == nil {
			n.cached.Store(true)
		}
	})
}

// evalAhead spells out as EVAL the scripts of every call of batch that a
// later call of the same name follows (calls of a lane are side by side in
// a batch, see lanes.take), while the node may lack scripts: an EVALSHA
// answered NOSCRIPT runs again after its batch, once the later call was
// applied, and a release would land after the re-lock that followed it
// (the re-lock refused, then the key deleted). EVAL cannot be refused so.
func evalAhead(ctx context.Context, batch []*call) {
	for i, c := range batch[:max(len(batch)-1, 0)] {
		if c.native {
			continue
		}
		name := LaneOf(c.op)
		for _, d := range batch[i+1:] {
			if d.lane != c.lane {
				break
			}
			if LaneOf(d.op) == name {
				spellOut(c.cmds)
				break
			}
		}
	}
}

// checkScripts reads the replies of batch's scripts once their round trip
// is over: a script the node lost (a restart) is sent again with EVAL,
// which loads it; it reports whether the node refused scripts (and
// switches it, see refuseScripts).
func (n *Redis) checkScripts(ctx context.Context, batch []*call) bool {
	refused := false
	for _, c := range batch {
		if c.native {
			continue // no script: nothing to load, nothing refused
		}
		if reload(ctx, n.via, c.cmds) {
			n.cached.Store(false)
			n.loadScripts()
		}
		for i := range c.cmds {
			if cmd := &c.cmds[i]; scriptsRefused(cmd.Err()) {
				n.refuseScripts(cmd.Err())
				refused = true
			}
		}
	}
	return refused
}
