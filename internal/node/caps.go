package node

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Caps is what a node's server is and which of its own compare-and-set
// commands the node's user may run, asked once (see Redis.Caps). The
// plain lock speaks them where the node has no scripts (see Native).
type Caps struct {
	// Known is set once the node answered the probe.
	Known bool
	// Server is "valkey" or "redis" ("" when the user may not run INFO),
	// Version its version: Valkey's own valkey_version (its redis_version
	// is always 7.2.4), else redis_version.
	Server, Version string
	// SetIfEq is SET key value IFEQ old (Valkey 8.1, Redis 8.4): the
	// extension of a plain lock in one command.
	SetIfEq bool
	// DelIfEq is DELIFEQ key value (Valkey 9.0), DelEx DELEX key IFEQ
	// value (Redis 8.4, Valkey 9.2): the release of a plain lock in one.
	DelIfEq, DelEx bool
}

// SetNXGet reports whether the node's server takes SET ... NX GET (Redis
// 7.0 on, every Valkey): a plain lock's grant in one command, which a node
// that speaks scripts sends instead of acquire_plain.lua (see beside).
// When the user may not run INFO, only a server with SET IFEQ is known to.
func (c Caps) SetNXGet() bool {
	if c.Server == "valkey" || c.SetIfEq {
		return true
	}
	major, _, _ := strings.Cut(c.Version, ".")
	n, err := strconv.Atoi(major)
	return c.Server == "redis" && err == nil && n >= 7
}

// Deletes reports whether the node has a compare-and-delete of its own.
func (c Caps) Deletes() bool { return c.DelIfEq || c.DelEx }

// Native reports whether the node has any of the commands a plain lock
// speaks natively beyond SET NX GET PX.
func (c Caps) Native() bool { return c.SetIfEq || c.Deletes() }

// String is how Health and the command line show the capabilities:
// "valkey 9.1.2: SET IFEQ, DELIFEQ"; "unknown" before the probe.
func (c Caps) String() string {
	if !c.Known {
		return "unknown"
	}
	server := "server ?"
	if c.Server != "" {
		server = c.Server + " " + c.Version
	}
	var cmds []string
	if c.SetIfEq {
		cmds = append(cmds, "SET IFEQ")
	}
	if c.DelIfEq {
		cmds = append(cmds, "DELIFEQ")
	}
	if c.DelEx {
		cmds = append(cmds, "DELEX IFEQ")
	}
	if len(cmds) == 0 {
		return server + ": no native compare-and-set"
	}
	return server + ": " + strings.Join(cmds, ", ")
}

// Caps returns the node's capabilities, Known once the probe answered.
func (n *Redis) Caps() Caps {
	if c := n.caps.Load(); c != nil {
		return *c
	}
	return Caps{}
}

// probeCaps asks the node, once, what it is and which native commands its
// user may run, all in one round trip: INFO server, and each command on a
// key beside name (the first lock name the node is asked about, so that an
// ACL key pattern that lets the user lock the name lets it ask; "" for
// none) that holds nothing, where each changes nothing: a command the
// server has answers nil or 0, one it lacks (or the user may not run) an
// error. A node that speaks without scripts then speaks natively where it
// can (Transactions becomes Native), unless its way was set (SetWay).
// Callers that need the answer wait for it (sync.Once).
func (n *Redis) probeCaps(name string) {
	n.probe.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		watched := make(chan struct{})
		go func() { // Close must not wait out a silent node's timeout
			defer close(watched)
			select {
			case <-n.life.Closing():
				cancel()
			case <-ctx.Done():
			}
		}()
		defer func() { cancel(); <-watched }() // the watcher ends with the probe
		c, err := askCaps(ctx, n.via, n.layout, name)
		if err != nil {
			return // unknown: the node speaks as before, and is asked no more
		}
		n.caps.Store(&c)
		if c.Native() && !n.forced.Load() {
			n.way.CompareAndSwap(uint32(Transactions), uint32(Native))
		}
	})
}

// askCaps is the probe's round trip (see probeCaps); its error is a
// failure to talk to the node.
func askCaps(ctx context.Context, c Conn, l Layout, name string) (Caps, error) {
	key := l.Beside(name, name+":redlock:probe")
	if key == "" {
		key = "redlock:probe"
	}
	info := NewText("info", "server")
	set := NewCmd("set", key, "redlock:probe", "ifeq", "redlock:probe", "px", 1000)
	delifeq := NewCmd("delifeq", key, "redlock:probe")
	delex := NewCmd("delex", key, "ifeq", "redlock:probe")
	cmds := []*Cmd{info, set, delifeq, delex}
	c.Send(ctx, cmds...)
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !errors.Is(err, ErrNil) && !isReply(err) {
			return Caps{}, err
		}
	}
	caps := Caps{Known: true, SetIfEq: accepted(set), DelIfEq: accepted(delifeq), DelEx: accepted(delex)}
	field := infoField(info.Text())
	if v, err := field("valkey_version"); err == nil {
		caps.Server, caps.Version = "valkey", v
	} else if v, err := field("redis_version"); err == nil {
		caps.Server, caps.Version = "redis", v
	}
	return caps, nil
}

// accepted reports whether the node ran cmd (an answer, nil included).
func accepted(cmd *Cmd) bool {
	err := cmd.Err()
	return err == nil || errors.Is(err, ErrNil)
}
