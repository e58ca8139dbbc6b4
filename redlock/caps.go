package redlock

import "github.com/redlock-go/redlock/internal/node"

// NodeCaps is what a node's server is and which of its own compare-and-set
// commands its user may run (see [NodeHealth.Caps]). A Mutex without
// fencing, reentrancy or a restart delay speaks them on a node without
// scripts: SET IFEQ for its extension, DELIFEQ or DELEX for its release
// (see docs/DEPLOYMENTS.md).
type NodeCaps struct {
	// Known is set once the node answered.
	Known bool
	// Server is "valkey" or "redis", and Version its version (Valkey's
	// own, not the redis_version it reports for compatibility); "" when
	// the user may not run INFO.
	Server, Version string
	// SetIfEq is SET key value IFEQ old (Valkey 8.1, Redis 8.4).
	SetIfEq bool
	// DelIfEq is DELIFEQ key value (Valkey 9.0).
	DelIfEq bool
	// DelEx is DELEX key IFEQ value (Redis 8.4, Valkey 9.2).
	DelEx bool
}

// String is the capabilities as the command line shows them:
// "valkey 9.1.2: SET IFEQ, DELIFEQ", "unknown" before the node answered.
func (c NodeCaps) String() string { return node.Caps(c).String() }
