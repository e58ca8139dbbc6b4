package redlock

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/quorum"
	"github.com/redlock-go/redlock/redlock/report"

	"github.com/redlock-go/redlock/internal/node"
)

// The audit's judgement: what each fact read from a node means for a
// lock on it (see audit.go, which reads the facts).

// judge fills a from the facts f and judges them.
func (au *auditor) judge(a *report.NodeAudit, f node.Facts) {
	info := f.Info
	a.Server, a.Version = "redis", info["redis_version"]
	if v := info["valkey_version"]; v != "" {
		a.Server, a.Version = "valkey", v
	}
	if info == nil {
		a.Server = ""
	}
	a.Role = info["role"]
	if a.Role == "slave" {
		a.Role = "replica"
	}
	a.Replicas, _ = strconv.Atoi(info["connected_slaves"])
	a.MaxMemory, _ = strconv.ParseInt(cmp.Or(f.Config["maxmemory"], info["maxmemory"]), 10, 64)
	a.Policy = cmp.Or(f.Config["maxmemory-policy"], info["maxmemory_policy"])
	a.AppendOnly = f.Config["appendonly"] == "yes" || info["aof_enabled"] == "1"
	a.AppendFsync = f.Config["appendfsync"]
	if f.Clocked {
		a.ClockOffset, a.RoundTrip = f.Offset, f.RoundTrip
	}
	a.User = f.User
	for cmd, err := range f.Rights {
		if err != nil {
			a.Missing = append(a.Missing, cmd)
		}
	}
	slices.Sort(a.Missing)
	if f.Rights["evalsha"] == nil {
		a.Ways = append(a.Ways, "scripts")
	}
	a.Caps = report.NodeCaps(f.Caps)
	if f.Caps.Native() {
		a.Ways = append(a.Ways, "native")
	}
	a.Ways = append(a.Ways, "transactions")

	var fs []report.Finding
	add := func(s report.Severity, code, format string, args ...any) { // an addFunc
		fs = append(fs, report.Finding{Severity: s, Code: code, Message: fmt.Sprintf(format, args...)})
	}
	if info != nil {
		add(report.SeverityInfo, "server", "%s %s, %s with %d replicas", a.Server, a.Version, a.Role, a.Replicas)
	}
	au.judgeKeeping(a, f, add)
	au.judgeRights(a, f, add)
	slices.SortStableFunc(fs, func(x, y report.Finding) int { return int(y.Severity) - int(x.Severity) })
	a.Findings = fs
}

// judgeKeeping judges whether the node keeps a key for its TTL: eviction,
// persistence, replication, its clock.
func (au *auditor) judgeKeeping(a *report.NodeAudit, f node.Facts, add addFunc) {
	judgeEviction(a, add)
	if f.Info != nil || f.Config != nil {
		au.judgePersistence(a, add)
	}
	au.judgeReplication(a, add)
	if f.Clocked {
		au.judgeClock(a, add)
	}
}

// addFunc adds a finding.
type addFunc func(s report.Severity, code, format string, args ...any)

func judgeEviction(a *report.NodeAudit, add addFunc) {
	switch {
	case a.Policy == "" || a.Policy == "noeviction":
	case a.MaxMemory == 0:
		add(report.SeverityInfo, "eviction", "maxmemory-policy %s has no effect while maxmemory is 0 (no limit); set noeviction before setting a limit", a.Policy)
	case strings.HasPrefix(a.Policy, "volatile-"):
		add(report.SeverityUnsafe, "eviction", "maxmemory %d with maxmemory-policy %s: under memory pressure the node evicts keys that have a TTL, "+
			"and every lock key has one: a held lock can vanish and be taken by another client; set maxmemory-policy noeviction", a.MaxMemory, a.Policy)
	default:
		add(report.SeverityUnsafe, "eviction", "maxmemory %d with maxmemory-policy %s: under memory pressure the node evicts keys, "+
			"lock keys included: a held lock can vanish and be taken by another client; set maxmemory-policy noeviction", a.MaxMemory, a.Policy)
	}
}

func (au *auditor) judgePersistence(a *report.NodeAudit, add addFunc) {
	var lose string
	switch {
	case !a.AppendOnly:
		lose = "appendonly no: a restarted node has forgotten the locks it granted"
	case a.AppendFsync == "":
		add(report.SeverityInfo, "config", "CONFIG GET refused: appendfsync unknown (always is needed to keep every grant across a crash)")
	case a.AppendFsync != "always":
		lose = "appendfsync " + a.AppendFsync + ": a crash loses the last grants, which a restarted node has then forgotten"
	}
	switch {
	case lose == "":
	case au.restart > 0:
		add(report.SeverityInfo, "persistence", "%s; the restart delay (%v) covers it", lose, au.restart)
	default:
		add(report.SeverityUnsafe, "persistence", "%s, and another client can take them; set appendonly yes and appendfsync always, or use WithRestartDelay", lose)
	}
}

func (au *auditor) judgeReplication(a *report.NodeAudit, add addFunc) {
	switch {
	case a.Role == "replica":
		add(report.SeverityDegraded, "replication", "the node is a replica: it refuses writes; give the library its master")
	case a.Replicas > 0 && au.replicas == 0:
		add(report.SeverityUnsafe, "replication", "%d replicas attached and no WithReplicaAck: a failover to a replica that had not received "+
			"a fresh grant loses it; use WithReplicaAck", a.Replicas)
	case au.replicas > a.Replicas:
		add(report.SeverityDegraded, "replication", "WithReplicaAck waits for %d replicas and %d are attached: every grant fails there", au.replicas, a.Replicas)
	}
}

func (au *auditor) judgeClock(a *report.NodeAudit, add addFunc) {
	off := a.ClockOffset.Round(time.Millisecond)
	switch {
	case au.tolerance > 0 && a.ClockOffset.Abs() > au.tolerance+a.RoundTrip/2:
		add(report.SeverityDegraded, "clock", "the node's clock is %v from this process's: the clock guard does not count its votes; synchronise its clock (NTP)", off)
	case au.tolerance == 0 && a.ClockOffset.Abs() > quorum.DefaultClockTolerance:
		add(report.SeverityUnsafe, "clock", "the node's clock is %v from this process's and the clock guard is off: its keys expire early or late; "+
			"synchronise its clock (NTP)", off)
	}
}

// judgeRights judges the rights the user lacks.
func (au *auditor) judgeRights(a *report.NodeAudit, f node.Facts, add addFunc) {
	missing := func(cmds ...string) []string {
		var out []string
		for _, c := range cmds {
			if f.Rights[c] != nil {
				out = append(out, strings.ToUpper(c))
			}
		}
		return out
	}
	if m := missing("set", "del", "pexpire", "pttl"); len(m) > 0 {
		add(report.SeverityUnsafe, "commands", "%s refused: every lock fails on this node; grant them (docs/DEPLOYMENTS.md has the ACL line)", strings.Join(m, ", "))
	}
	for _, r := range []struct {
		code string
		cmds []string
		what string
	}{
		{"scripts", []string{"evalsha", "eval", "script|load"}, "the node is spoken to by transactions: a Mutex works; semaphores, reader-writer and multi-name locks are refused there"},
		{"queue", []string{"zadd", "zrem", "zpopmin"}, "waiters do not take turns on this node"},
		{"channels", []string{"publish", "subscribe"}, "releases are not announced there: waiters poll (grant &redlock:* and the commands)"},
		{"time", []string{"time"}, "the node's clock is not checked (see WithClockTolerance)"},
		{"info", []string{"info"}, "the node is not checked for being the same server as another, and cannot be audited in full"},
	} {
		if m := missing(r.cmds...); len(m) > 0 {
			add(report.SeverityDegraded, r.code, "%s refused: %s", strings.Join(m, ", "), r.what)
		}
	}
	if !f.DryRun {
		add(report.SeverityInfo, "rights", "ACL DRYRUN refused: each command was tried in a form that changes nothing; SUBSCRIBE was not checked")
	}
}
