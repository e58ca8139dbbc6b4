package node

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The audit: what a node says of itself that decides whether it can keep
// a lock (eviction, persistence, replication, its clock) and what its user
// may run. It only reads: INFO, CONFIG GET, TIME, ACL WHOAMI and ACL
// DRYRUN, or, where ACL DRYRUN is refused, the commands themselves in
// forms that change nothing (see probes). The layers above judge the
// facts.

// Facts is what an audit read from a node. A field the node would not
// tell is left zero, with the refusal in Refused.
type Facts struct {
	// RoundTrip is TIME's round trip, and Offset the node's clock minus
	// this process's at the middle of it; Clocked is set when TIME was
	// answered.
	RoundTrip time.Duration
	Offset    time.Duration
	Clocked   bool
	// Info holds the fields of INFO server, memory, persistence and
	// replication; nil when INFO was refused.
	Info map[string]string
	// Config holds CONFIG GET's answers for maxmemory, maxmemory-policy,
	// appendonly and appendfsync; nil when CONFIG was refused.
	Config map[string]string
	// User is the connection's ACL user ("" when ACL WHOAMI was refused).
	User string
	// Rights maps each command the library may send (see AuditedCommands)
	// to nil when the user may run it, or to the refusal; a command not
	// in it was not checked. DryRun says whether ACL DRYRUN checked them
	// (all of them), or commands that change nothing (some).
	Rights map[string]error
	DryRun bool
	// Caps is what the probe of the node's capabilities found (see Caps);
	// zero when it could not ask.
	Caps Caps
}

// AuditedCommands are the commands whose rights an audit checks, each
// with the arguments ACL DRYRUN checks it with: the channel is one the
// library announces on, the key any.
var AuditedCommands = map[string][]any{
	"set": {"set", "redlock:audit", "x"}, "del": {"del", "redlock:audit"}, "pexpire": {"pexpire", "redlock:audit", 1},
	"pttl": {"pttl", "redlock:audit"},
	"eval": {"eval", "return 1", 0}, "evalsha": {"evalsha", "0000000000000000000000000000000000000000", 0},
	"script|load": {"script", "load", "return 1"},
	"zadd":        {"zadd", "redlock:audit", 1, "x"}, "zrem": {"zrem", "redlock:audit", "x"}, "zpopmin": {"zpopmin", "redlock:audit"},
	"publish": {"publish", ChannelPrefix + "audit", "x"}, "subscribe": {"subscribe", ChannelPrefix + "audit"},
	"time": {"time"}, "info": {"info"},
}

// Auditor is a Node that can be audited.
type Auditor interface {
	// Audit reads the node's facts, within ctx. It returns an error only
	// when the node could not be reached or refused this client (a wrong
	// password): a refused command is a fact.
	Audit(ctx context.Context) (Facts, error)
}

// Audit implements Auditor. A client of one server is first dialled
// quietly (see Transport.Ping); a cluster or ring is read through whichever
// server its client picks for each command.
func (n *Redis) Audit(ctx context.Context) (Facts, error) {
	var f Facts
	if err := n.via.Ping(ctx); err != nil && (Unreachable(err) || AuthFailure(err)) {
		return f, err
	}
	if err := f.readClock(ctx, n.via, n.now); err != nil {
		return f, err
	}
	if err := f.readSettings(ctx, n.via, n.layout); err != nil {
		return f, err
	}
	f.readRights(ctx, n.via, n.now)
	return f, nil
}

// readClock reads the node's clock with TIME, alone in its round trip; it
// returns an error only when the node could not be reached.
func (f *Facts) readClock(ctx context.Context, c Conn, now func() time.Time) error {
	clock := NewCmd(timeArgs...)
	sent := now()
	c.Send(ctx, clock)
	got := now()
	t, err := clock.Time()
	switch {
	case err == nil:
		f.Clocked, f.RoundTrip = true, got.Sub(sent)
		f.Offset = t.Sub(sent.Add(f.RoundTrip / 2).Round(0))
	case Unreachable(err):
		return err
	}
	return nil
}

// readSettings reads, in one round trip, INFO, CONFIG GET, the user (ACL
// WHOAMI, or CLIENT INFO, which is in @connection, which least-privilege
// lines grant), then the node's Caps (commands on a key that holds nothing,
// which change nothing); it returns an error only
// when the node could not be reached.
func (f *Facts) readSettings(ctx context.Context, c Conn, l Layout) error {
	info := NewText("info", "server", "memory", "persistence", "replication")
	cfg := NewCmd("config", "get", "*")
	whoami := NewCmd("acl", "whoami")
	client := NewCmd("client", "info")
	c.Send(ctx, info, cfg, whoami, client)
	if err := info.Err(); err != nil && !Misconfigured(err) && !Unreachable(err) {
		info = NewText("info") // a server before Redis 7 takes one section: all of them
		c.Send(ctx, info)
	}
	if text, err := info.Text(); err == nil {
		f.Info = infoFields(text)
	} else if Unreachable(err) {
		return err
	}
	if m, err := cfg.StrMap(); err == nil {
		f.Config = configFields(m)
	}
	f.User, _ = whoami.Text()
	if ci, err := client.Text(); err == nil && f.User == "" {
		f.User = clientUser(ci)
	}
	f.Caps, _ = askCaps(ctx, c, l, "")
	return nil
}

// configFields keeps, of CONFIG GET's answer, the settings audited.
func configFields(cfg map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"maxmemory", "maxmemory-policy", "appendonly", "appendfsync"} {
		if v, ok := cfg[k]; ok {
			out[k] = v
		}
	}
	return out
}

// clientUser reads the user from a CLIENT INFO reply.
func clientUser(info string) string {
	for _, field := range strings.Fields(info) {
		if u, ok := strings.CutPrefix(field, "user="); ok {
			return u
		}
	}
	return ""
}

// readRights reads the user's rights, TIME's and INFO's as they were
// answered.
func (f *Facts) readRights(ctx context.Context, c Conn, now func() time.Time) {
	f.Rights, f.DryRun = rights(ctx, c, f.User, now)
	if f.Info == nil && f.Rights["info"] == nil {
		f.Rights["info"] = errors.New("INFO refused")
	}
	if f.Clocked {
		f.Rights["time"] = nil
	} else if f.Rights["time"] == nil {
		f.Rights["time"] = errors.New("TIME refused")
	}
}

// rights checks the user's rights to AuditedCommands, in one round trip:
// with ACL DRYRUN when the user may run it, else (one more) by running
// each command in a form that changes nothing (see probes).
func rights(ctx context.Context, c Conn, user string, now func() time.Time) (map[string]error, bool) {
	if user != "" {
		if out, ok := dryRun(ctx, c, user); ok {
			return out, true
		}
	}
	key := "redlock:audit:" + strconv.FormatInt(now().UnixNano(), 36) // no such key: nothing changes
	out := map[string]error{}
	for cmd, rc := range pipelined(ctx, c, probes(key)) {
		switch err := rc.Err(); {
		case err == nil || !Misconfigured(err):
			out[cmd] = nil // refused for its key at most: the command is granted
		case strings.Contains(err.Error(), " key"): // "one of the keys", "a key"
			out[cmd] = nil
		default:
			out[cmd] = err
		}
	}
	return out, false
}

// dryRun checks the user's rights with ACL DRYRUN; false when the user may
// not run it.
func dryRun(ctx context.Context, c Conn, user string) (map[string]error, bool) {
	args := make(map[string][]any, len(AuditedCommands))
	for cmd, a := range AuditedCommands {
		args[cmd] = append([]any{"acl", "dryrun", user}, a...)
	}
	out := map[string]error{}
	for cmd, rc := range pipelined(ctx, c, args) {
		res, err := rc.Text()
		if err != nil {
			return nil, false
		}
		if (res != "OK" && !strings.Contains(res, "access the")) || strings.Contains(res, "channel") {
			// A key outside the user's patterns is not a missing
			// right: the lock's keys are the caller's to allow.
			out[cmd] = errors.New(res)
		} else {
			out[cmd] = nil
		}
	}
	return out, true
}

// pipelined sends every command of cmds in one round trip and returns
// them answered, each with its own reply or error.
func pipelined(ctx context.Context, c Conn, cmds map[string][]any) map[string]*Cmd {
	sent := make(map[string]*Cmd, len(cmds))
	all := make([]*Cmd, 0, len(cmds))
	for _, name := range slices.Sorted(maps.Keys(cmds)) { // the same order every time
		sent[name] = NewCmd(cmds[name]...)
		all = append(all, sent[name])
	}
	c.Send(ctx, all...)
	return sent
}

// probes are, for a user that may not run ACL DRYRUN, each audited
// command but SUBSCRIBE (which would take the connection) in a form that
// changes nothing on a key that does not exist: EVALSHA of a script no
// node has (NOSCRIPT), SET and ZADD only if present (XX), PUBLISH to a
// channel no one hears.
func probes(key string) map[string][]any {
	return map[string][]any{
		"set": {"set", key, "x", "xx"}, "del": {"del", key}, "pexpire": {"pexpire", key, 1}, "pttl": {"pttl", key},
		"evalsha": {"evalsha", "0000000000000000000000000000000000000000", 0},
		"zadd":    {"zadd", key, "xx", 1, "x"}, "zrem": {"zrem", key, "x"}, "zpopmin": {"zpopmin", key},
		"publish": {"publish", ChannelPrefix + "audit", ""},
	}
}

// infoFields reads an INFO reply's "key:value" lines.
func infoFields(info string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}
