package node

import (
	"context"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/redis/go-redis/v9"
)

// FailoverAddr is the address go-redis reports for every Sentinel-managed
// client: the master's address comes from the sentinels, and changes with
// failovers.
const FailoverAddr = "FailoverClient"

// masterName is the address of the master a Sentinel-managed client's
// last connection reached.
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

// masters holds, per Sentinel-managed client, the master it reached.
// Entries go with their clients.
var masters sync.Map // weak.Pointer[redis.Client] → *masterName

// masterOf returns where the master that c's connections reach is kept.
// go-redis reports only a placeholder address for a Sentinel-managed
// client, and learns the master's from the sentinels when it dials; a dial
// hook, added once per client, notes the address each new connection
// reached: after a failover, go-redis drops its connections to the old
// master and dials the new one. No command is sent for it, so it needs no
// permission.
func masterOf(c *redis.Client) *masterName {
	key := weak.Make(c)
	if v, ok := masters.Load(key); ok {
		return v.(*masterName)
	}
	m := new(masterName)
	if v, loaded := masters.LoadOrStore(key, m); loaded {
		return v.(*masterName)
	}
	runtime.AddCleanup(c, func(k weak.Pointer[redis.Client]) { masters.Delete(k) }, key)
	c.AddHook(dialHook{m: m})
	return m
}

// dialHook notes the remote address of each connection a client dials.
type dialHook struct{ m *masterName }

func (h dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil && conn.RemoteAddr() != nil {
			a := conn.RemoteAddr().String() + " (Sentinel-managed master)"
			h.m.at.Store(&a)
		}
		return conn, err
	}
}

func (dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
