package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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

// Audit implements Auditor: the transport's, when it can be audited.
func (n *Redis) Audit(ctx context.Context) (Facts, error) {
	if a, ok := n.via.(Auditor); ok {
		return a.Audit(ctx)
	}
	return Facts{}, fmt.Errorf("redlock: a node over %T cannot be audited", n.via)
}

// Audit implements Auditor. A client of one server is first dialled
// quietly (see QuietDial); a cluster or ring is read through whichever
// server its client picks for each command.
func (g *goRedis) Audit(ctx context.Context) (Facts, error) {
	var f Facts
	if err := g.QuietDial(ctx); err != nil {
		return f, err
	}
	c := g.c
	if err := c.Ping(ctx).Err(); err != nil && (Unreachable(err) || AuthFailure(err)) {
		return f, err
	}
	if err := f.readClock(ctx, c, g.now); err != nil {
		return f, err
	}
	if err := f.readSettings(ctx, c); err != nil {
		return f, err
	}
	f.readRights(ctx, c, g.now)
	return f, nil
}

// readClock reads the node's clock with TIME, alone in its round trip; it
// returns an error only when the node could not be reached.
func (f *Facts) readClock(ctx context.Context, c redis.UniversalClient, now func() time.Time) error {
	sent := now()
	t, err := c.Time(ctx).Result()
	got := now()
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
func (f *Facts) readSettings(ctx context.Context, c redis.UniversalClient) error {
	pipe := c.Pipeline()
	info := pipe.Info(ctx, "server", "memory", "persistence", "replication")
	cfg := pipe.ConfigGet(ctx, "*")
	whoami := pipe.Do(ctx, "acl", "whoami")
	client := pipe.Do(ctx, "client", "info")
	_, _ = pipe.Exec(ctx) // each command keeps its own error
	if err := info.Err(); err != nil && !Misconfigured(err) && !Unreachable(err) {
		info = c.Info(ctx) // a server before Redis 7 takes one section: all of them
	}
	if err := info.Err(); err == nil {
		f.Info = infoFields(info.Val())
	} else if Unreachable(err) {
		return err
	}
	if cfg.Err() == nil {
		f.Config = configFields(cfg.Val())
	}
	f.User, _ = whoami.Text()
	if ci, err := client.Text(); err == nil && f.User == "" {
		f.User = clientUser(ci)
	}
	f.Caps, _ = askCaps(ctx, newGoRedis(c, time.Now), Layout{Sharded: isSharded(c)}, "")
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
func (f *Facts) readRights(ctx context.Context, c redis.UniversalClient, now func() time.Time) {
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
func rights(ctx context.Context, c redis.UniversalClient, user string, now func() time.Time) (map[string]error, bool) {
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
func dryRun(ctx context.Context, c redis.UniversalClient, user string) (map[string]error, bool) {
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
func pipelined(ctx context.Context, c redis.UniversalClient, cmds map[string][]any) map[string]*redis.Cmd {
	pipe := c.Pipeline()
	sent := make(map[string]*redis.Cmd, len(cmds))
	for _, name := range slices.Sorted(maps.Keys(cmds)) { // the same order every time
		sent[name] = pipe.Do(ctx, cmds[name]...)
	}
	_, _ = pipe.Exec(ctx)
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

// QuietDial checks that the node's server can be dialled at all, with the
// client's own dialer (TLS included) and one try, apart from the client's
// pool: a failed dial there is retried (DialerRetries) and logged by
// go-redis on every command, and the library's background checks of a
// node that is down must not make it log. It closes the connection it
// made. It checks nothing for a cluster, a ring or a Sentinel-managed
// client, whose servers the client finds itself.
func (g *goRedis) QuietDial(ctx context.Context) error {
	rc, ok := g.c.(*redis.Client)
	if !ok || g.address == FailoverAddr {
		return nil
	}
	o := rc.Options()
	if o.Dialer == nil {
		return nil
	}
	dctx := ctx
	if o.DialTimeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, o.DialTimeout)
		defer cancel()
	}
	var num uint64
	if g.dials != nil {
		num = g.dials.started.Add(1)
	}
	conn, err := o.Dialer(dctx, o.Network, o.Addr)
	switch {
	case g.dials == nil:
	case err == nil:
		g.dials.connected(num) // the host listens: calls go again (see refusal.go)
	case refusedDial(err):
		// A dial failure as any: LastDialFailure names it, before the
		// calls it fails learn of it.
		f := &DialFailure{Err: err, At: g.now()}
		g.dials.record(o.Addr, dialOutcome{n: num, failure: f})
		g.dials.refused(num, f)
	}
	if err != nil {
		return err // "dial tcp ADDR: ..." names the address
	}
	_ = conn.Close()
	return nil
}

// CheckAddr reports an address a client of one server cannot dial as
// written: a TCP address without a port ("localhost"), which go-redis
// would only find out by failing every dial.
func CheckAddr(c redis.UniversalClient) error {
	rc, ok := c.(*redis.Client)
	if !ok {
		return nil
	}
	o := rc.Options()
	if o.Addr == FailoverAddr || o.Network != "" && o.Network != "tcp" && !strings.HasPrefix(o.Network, "tcp") {
		return nil
	}
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return fmt.Errorf("address %q cannot be dialled: %w (write host:port, such as %q)", o.Addr, err, net.JoinHostPort(o.Addr, "6379"))
	}
	// A number or a service name in /etc/services: no network I/O.
	if p, err := net.LookupPort("tcp", port); err != nil || p == 0 {
		return fmt.Errorf("address %q cannot be dialled: port %q is not a port from 1 to 65535 (write host:port, such as %q)", o.Addr, port, net.JoinHostPort(host, "6379"))
	}
	return nil
}
