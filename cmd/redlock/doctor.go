package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// exitUnsafe is doctor's status when a node is unsafe or could not be read:
// a deployment gate stops there.
const exitUnsafe = 1

// findingJSON is one finding in doctor --json.
type findingJSON struct {
	Severity string `json:"severity"` // "info", "degraded" or "unsafe"
	Code     string `json:"code"`
	Message  string `json:"message"`
}

// auditJSON is one node in doctor --json.
type auditJSON struct {
	Addr          string        `json:"addr"`
	Verdict       string        `json:"verdict"` // "ok", "degraded", "unsafe", "unreachable" or "refused"
	Error         string        `json:"error,omitempty"`
	Server        string        `json:"server,omitempty"`
	Version       string        `json:"version,omitempty"`
	Role          string        `json:"role,omitempty"`
	Replicas      int           `json:"replicas"`
	MaxMemory     int64         `json:"maxmemory"`
	Policy        string        `json:"maxmemory_policy,omitempty"`
	AppendOnly    bool          `json:"appendonly"`
	AppendFsync   string        `json:"appendfsync,omitempty"`
	OffsetMillis  float64       `json:"clock_offset_ms"`
	RoundTripMs   float64       `json:"round_trip_ms"`
	User          string        `json:"user,omitempty"`
	Ways          []string      `json:"ways,omitempty"`
	Native        []string      `json:"native,omitempty"` // the server's own compare-and-set commands the user may run
	MissingRights []string      `json:"missing_rights,omitempty"`
	Findings      []findingJSON `json:"findings,omitempty"`
}

// doctor is `redlock doctor`: every node's audit, one row per node, or as
// JSON; exit 1 when a node is unsafe or could not be read.
func doctor(inv *invocation, stdout, stderr io.Writer) int {
	opts := []redlock.Option{redlock.WithNodeTimeout(opNodeTimeout)}
	if inv.restart > 0 { // the TTL may not exceed the delay
		opts = append(opts, redlock.WithTTL(min(inv.restart, defaultTTL)), redlock.WithRestartDelay(inv.restart))
	}
	if inv.replicas > 0 { // the timeout is not judged: any below the node timeout
		opts = append(opts, redlock.WithReplicaAck(inv.replicas, opNodeTimeout/2))
	}
	rl, closeAll, err := connect(inv, opts...)
	if err != nil {
		return connectFailed(stderr, "doctor", err)
	}
	defer closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	audits, err := rl.Audit(ctx)
	if audits == nil {
		fmt.Fprintf(stderr, "redlock: doctor: %v\n", err)
		return exitSoftware
	}
	out := make([]auditJSON, len(audits))
	status := exitOK
	for i := range audits {
		out[i] = auditToJSON(&audits[i])
		if v := out[i].Verdict; v == "unsafe" || v == "unreachable" || v == "refused" {
			status = exitUnsafe
		}
	}
	if inv.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return exitSoftware
		}
		return status
	}
	printDoctor(stdout, out)
	if err != nil {
		fmt.Fprintf(stderr, "redlock: doctor: %v\n", err)
	}
	return status
}

// auditToJSON is a as doctor prints it.
func auditToJSON(a *report.NodeAudit) auditJSON {
	verdict := a.Verdict()
	if verdict == report.SeverityInfo {
		verdict = 0 // nothing to fix: "ok"
	}
	j := auditJSON{Addr: a.Addr, Verdict: verdict.String(), Server: a.Server, Version: a.Version, Role: a.Role,
		Replicas: a.Replicas, MaxMemory: a.MaxMemory, Policy: a.Policy, AppendOnly: a.AppendOnly, AppendFsync: a.AppendFsync,
		OffsetMillis: millis(a.ClockOffset), RoundTripMs: millis(a.RoundTrip), User: a.User, Ways: a.Ways, Native: native(a.Caps), MissingRights: a.Missing}
	if a.Err != nil {
		// Not read: the verdict names why, as the node's one finding does
		// ("unreachable", or "refused" for a node that refuses this
		// client: a wrong password), not every such node "unreachable".
		j.Verdict, j.Error = "unreachable", nodeCause(a.Err)
		for _, f := range a.Findings {
			if f.Code == "refused" {
				j.Verdict = "refused"
			}
		}
	}
	for _, f := range a.Findings {
		j.Findings = append(j.Findings, findingJSON{Severity: f.Severity.String(), Code: f.Code, Message: f.Message})
	}
	return j
}

// native lists the server's own compare-and-set commands that c says the
// user may run.
func native(c report.NodeCaps) []string {
	var out []string
	for _, n := range []struct {
		has  bool
		name string
	}{{c.SetIfEq, "SET IFEQ"}, {c.DelIfEq, "DELIFEQ"}, {c.DelEx, "DELEX IFEQ"}} {
		if n.has {
			out = append(out, n.name)
		}
	}
	return out
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// printDoctor prints out as a table, one row per node, then each finding
// above info.
func printDoctor(w io.Writer, out []auditJSON) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSERVER\tROLE\tEVICTION\tPERSISTENCE\tCLOCK\tWAYS\tNATIVE\tMISSING\tVERDICT")
	for _, a := range out {
		if a.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t-\t%s\n", a.Addr, a.Verdict)
			continue
		}
		role := a.Role
		if a.Role == "master" {
			role += ", " + strconv.Itoa(a.Replicas) + " replicas"
		}
		eviction := a.Policy
		if a.MaxMemory > 0 {
			eviction += " (maxmemory " + strconv.FormatInt(a.MaxMemory, 10) + ")"
		}
		persistence := "aof off"
		if a.AppendOnly {
			persistence = "aof " + dash(a.AppendFsync)
		}
		clock := fmt.Sprintf("%+.1fms (rtt %.1fms)", a.OffsetMillis, a.RoundTripMs)
		fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Addr, dash(a.Server), a.Version, dash(role), dash(eviction),
			persistence, clock, strings.Join(a.Ways, ","), dash(strings.Join(a.Native, "+")), dash(strings.Join(a.MissingRights, ",")), a.Verdict)
	}
	_ = tw.Flush()
	for _, a := range out {
		for _, f := range a.Findings {
			if f.Severity != "info" || f.Code != "server" {
				fmt.Fprintf(w, "%s: %s %s: %s\n", a.Addr, f.Severity, f.Code, f.Message)
			}
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
