package goredis

import (
	"sync/atomic"
)

// FailoverAddr is the address go-redis reports for every Sentinel-managed
// client: the master's address comes from the sentinels, and changes with
// failovers.
const FailoverAddr = "FailoverClient"

// masterName is the address of the master a Sentinel-managed client's
// last connection reached. go-redis reports only a placeholder address for
// such a client, and learns the master's from the sentinels when it dials;
// the client's dial hook (see dial.go) notes the address each new
// connection reached: after a failover, go-redis drops its connections to
// the old master and dials the new one.
type masterName struct{ at atomic.Pointer[string] }

// name returns the master's address, "" before the first connection (or
// for a client that is not Sentinel-managed: m is nil).
func (m *masterName) name() string {
	if m == nil {
		return ""
	}
	if a := m.at.Load(); a != nil {
		return *a
	}
	return ""
}
