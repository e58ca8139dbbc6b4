package report

import "time"

// Severity says how much a [Finding] matters.
type Severity uint8

// The severities, least first.
const (
	// SeverityInfo is a fact worth knowing that costs nothing (the server's
	// version, a setting that could not be read).
	SeverityInfo Severity = iota + 1
	// SeverityDegraded is a feature that falls back (a right missing: the
	// lock works without it), or a node that does not take part (it cannot
	// be reached, refuses this client, or does not vote for its clock):
	// the lock tolerates it as a failed node.
	SeverityDegraded
	// SeverityUnsafe is a setting under which the node can lose a lock it
	// granted while it is held (eviction, no persistence, replicas not
	// waited for): another client can then take it.
	SeverityUnsafe
)

// String returns "info", "degraded" or "unsafe"; "ok" for zero.
func (s Severity) String() string {
	switch s {
	case SeverityInfo:
		return "info"
	case SeverityDegraded:
		return "degraded"
	case SeverityUnsafe:
		return "unsafe"
	}
	return "ok"
}

// Finding is one thing an audit found on a node (see [NodeAudit]).
type Finding struct {
	Severity Severity
	// Code names what was found: "eviction", "persistence", "replication",
	// "clock" (unsafe or degraded); "scripts", "queue", "channels",
	// "time", "info" (a right missing: degraded), "commands" (a right the
	// lock needs: unsafe, every lock fails there), "unreachable",
	// "refused" (degraded); "server", "config", "rights" (info).
	// docs/DEPLOYMENTS.md says what each means and how to fix it.
	Code string
	// Message says what was found, what it risks, and how to fix it.
	Message string
}

// String returns the finding as "severity code: message".
func (f Finding) String() string { return f.Severity.String() + " " + f.Code + ": " + f.Message }

// NodeAudit is what an audit found on one node (see redlock.Redlock.Audit).
type NodeAudit struct {
	// Index is the node's position in the clients given to redlock.New.
	Index int
	// Addr is the node's address as its client reports it.
	Addr string
	// At is when the audit ended.
	At time.Time
	// Err is why the node could not be read, a [*NodeError]: it could not
	// be reached, or refused this client (a wrong password: it wraps
	// redlock.ErrMisconfigured). The fields below are then zero but Findings.
	Err error
	// Server is "redis" or "valkey", and Version its version; "" when
	// INFO was refused.
	Server, Version string
	// Role is "master" or "replica" (INFO's "slave"), and Replicas how
	// many replicas are attached.
	Role     string
	Replicas int
	// MaxMemory is maxmemory in bytes (0: no limit), and Policy
	// maxmemory-policy.
	MaxMemory int64
	Policy    string
	// AppendOnly says whether the append-only file is on, and AppendFsync
	// its fsync policy ("" when CONFIG GET was refused).
	AppendOnly  bool
	AppendFsync string
	// ClockOffset is the node's clock minus this process's, read by TIME
	// with a round trip of RoundTrip; both zero when TIME was refused.
	ClockOffset, RoundTrip time.Duration
	// User is the connection's ACL user ("" when ACL WHOAMI was refused).
	User string
	// Ways are the ways the node can be spoken to (see [NodeHealth.Speaks]):
	// "scripts" unless scripting is refused, "native" when the server has
	// a compare-and-set of its own (see Caps), and "transactions".
	Ways []string
	// Caps is what the server is and which of its own compare-and-set
	// commands the user may run (see [NodeHealth.Caps]).
	Caps NodeCaps
	// Missing are the commands the user may not run, of those the library
	// sends, sorted; nil when none (or they could not be checked: see the
	// finding "rights").
	Missing []string
	// Findings are what was found, most severe first.
	Findings []Finding
}

// Verdict returns the severity of the most severe finding; 0 when none.
func (a *NodeAudit) Verdict() Severity {
	var v Severity
	for _, f := range a.Findings {
		v = max(v, f.Severity)
	}
	return v
}

// AuditObserver is an [Observer] that also hears what audits find (see
// redlock.Redlock.Audit). Give it to redlock.New with
// redlock.WithObserver.
type AuditObserver interface {
	Observer
	// Found is called once per node and [Finding.Code] above
	// [SeverityInfo], the first time an audit finds it, on the goroutine
	// of the audit (the background's, or Audit's caller's): index and
	// addr name the node as [NodeAudit] does.
	Found(index int, addr string, f Finding)
}
