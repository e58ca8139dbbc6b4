package node

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Way is how a node is spoken to. A node starts with scripts; a node whose
// user is refused scripts (an ACL without @scripting, EVAL renamed away, a
// Valkey without its Lua engine) switches by itself, once, to the server's
// own commands where the plain lock has them (see Caps) and to optimistic
// transactions for the rest.
type Way uint32

// The ways a node is spoken to.
const (
	// Scripts runs each operation as one Lua script (EVALSHA): one round
	// trip, batched with other names' operations.
	Scripts Way = iota
	// Native is Transactions, except that a plain lock's extension is
	// SET key token IFEQ token PX ttl where the server has it (Valkey 8.1,
	// Redis 8.4), and its release DELIFEQ key token (Valkey 9.0) or DELEX
	// key IFEQ token (Redis 8.4): single commands, batched with the node's
	// other operations as scripts are. A native release names no queued
	// waiter: it is announced to every waiter in the same round trip.
	Native
	// Transactions carries each operation without scripts: a single
	// command where one does the job (a plain lock's SET NX GET PX,
	// batched with the node's other operations), else WATCH of the keys,
	// the reads, then MULTI ... EXEC, retried while a watched key
	// changed, until the node timeout, on a connection of its own.
	Transactions
)

// String names the way as Health reports it.
func (w Way) String() string {
	switch w {
	case Scripts:
		return "scripts"
	case Native:
		return "native"
	case Transactions:
		return "transactions"
	}
	return fmt.Sprintf("way(%d)", uint32(w))
}

// ErrNoScripts is the error of an operation that has no way without
// scripts (a semaphore's, a reader-writer lock's, a multi-name lock's) on a
// node that refuses them. It wraps ErrMisconfigured: no retry changes it.
var ErrNoScripts = fmt.Errorf("%w: the node refuses Lua scripts", ErrMisconfigured)

// noScripts is the error of op on a node that refuses scripts.
func noScripts(what string, why error) error {
	if why == nil {
		return fmt.Errorf("%w, which %s needs: grant the user +@scripting (EVALSHA, EVAL), or use a Mutex", ErrNoScripts, what)
	}
	return fmt.Errorf("%w (%v), which %s needs: grant the user +@scripting (EVALSHA, EVAL), or use a Mutex", ErrNoScripts, why, what) //nolint:errorlint // the node's refusal is shown, not wrapped: it is not this operation's error
}

// ErrAborted is the error of an operation without scripts whose every
// transaction found a watched key changed (EXEC answered nil) until the
// node timeout: nothing was applied.
var ErrAborted = errors.New("redlock: a watched key changed in every transaction until the node timeout")

// scriptsRefused reports whether err is a node's refusal to run a script at
// all (as opposed to a script that ran and failed): the user lacks
// EVALSHA or EVAL, the command is unknown (renamed away), or the server
// has no Lua engine (a Valkey 9 without it answers EVALSHA NOSCRIPT, and
// the EVAL that follows "ERR Could not find scripting engine 'lua'").
func scriptsRefused(err error) bool {
	// Checked on every reply: nil first, before errors.As's target (which
	// escapes to the heap) is made.
	return err != nil && refusedScripts(err)
}

func refusedScripts(err error) bool {
	msg, ok := replyOf(err)
	if !ok {
		return false
	}
	msg = strings.ToLower(msg)
	if strings.HasPrefix(msg, "err could not find scripting engine") {
		return true // a Valkey whose Lua engine is not loaded (MODULE UNLOAD lua)
	}
	if !strings.HasPrefix(msg, "noperm") && !strings.HasPrefix(msg, "err unknown command") {
		return false
	}
	return strings.Contains(msg, "'evalsha'") || strings.Contains(msg, "'eval'")
}

// Way returns how the node is spoken to now.
func (n *Redis) Way() Way { return Way(n.way.Load()) }

// SetWay makes the node speak w from its first request on, with no probe:
// Transactions or Native for a node known to refuse scripts (Native
// speaks the commands the probe finds, DELEX until it answered: in tests,
// a miniredis, which has DELEX), Scripts to start as every node does. The
// conformance suite speaks each way to a node this way. Call it before the
// first Do.
func (n *Redis) SetWay(w Way) {
	n.forced.Store(w != Scripts)
	n.way.Store(uint32(w))
}

// Refusal returns the node's refusal of scripts, nil when none was seen.
func (n *Redis) Refusal() error {
	if p := n.refusal.Load(); p != nil {
		return *p
	}
	return nil
}

// refuseScripts switches the node to speaking without scripts, once, for
// the refusal err: natively where the node's Caps allow (the probe, still
// under way, may find them later: it then switches Transactions to
// Native), with transactions otherwise.
func (n *Redis) refuseScripts(err error) {
	if !n.refusal.CompareAndSwap(nil, &err) {
		return
	}
	w := Transactions
	if n.Caps().Native() {
		w = Native
	}
	n.way.CompareAndSwap(uint32(Scripts), uint32(w))
}

// transactAll runs the calls of a batch without scripts: each name's calls
// one after the other in the batch's order (which keeps the name's order),
// the names side by side, each call on its own connection. Calls whose
// node timeout passed are not sent.
func (n *Redis) transactAll(batch []*call) {
	rest := batch[:0]
	for _, c := range batch {
		if o, ok := c.op.(*Extensions); ok {
			n.split(c, o) // each its own call: side by side by name
			continue
		}
		rest = append(rest, c)
	}
	batch = rest
	if len(batch) == 0 {
		return
	}
	n.probeCaps(LaneOf(batch[0].op)) // waits for the probe run started with the node
	w := n.Way()
	if why := n.Refusal(); why != nil && n.onWay != nil {
		n.told.Do(func() { n.onWay(w, why) }) // once the way is known
	}
	byName := map[string][]*call{}
	var names []string
	for _, c := range batch {
		name := LaneOf(c.op)
		if _, ok := byName[name]; !ok {
			names = append(names, name)
		}
		byName[name] = append(byName[name], c)
	}
	var wg sync.WaitGroup
	for _, name := range names[1:] {
		wg.Go(func() { n.transactEach(byName[name], w) })
	}
	n.transactEach(byName[names[0]], w)
	wg.Wait()
}

// transactEach runs calls without scripts, one after the other.
func (n *Redis) transactEach(calls []*call, w Way) {
	for _, c := range calls {
		if n.now().After(c.sendBy) {
			c.finish(Reply{Err: fmt.Errorf("%w: the node timeout passed in the queue", ErrUnsent)})
			continue
		}
		op, ok := c.op.(Transacted)
		if err := WithoutScripts(c.op, n.Refusal()); err != nil || !ok {
			c.finish(Reply{Err: err})
			continue
		}
		rep := op.Transact(c.ctx, n.tx(w, c.sendBy))
		if rep.Err == nil {
			rep.Time = n.clockOf(c.ctx, c.op)
		}
		c.finish(rep)
	}
}
