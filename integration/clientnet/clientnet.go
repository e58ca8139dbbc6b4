// Package clientnet is the network as one client process sees it, for
// integration tests: apart from the Redis harness so that programs using
// the harness (the demo) do not link toxiproxy, whose dependencies hash
// with MD5 at start, which FIPS 140-only mode refuses.
package clientnet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// ClientNet is the network as one client process sees it: an in-process
// TCP proxy (toxiproxy) on 127.0.0.1 in front of each node, through which
// that process's clients connect. Faults are injected per (client, node)
// pair, so two clients can see different partitions of the same nodes.
// The kernel of these machines has no netem; this is the replacement.
//
// A ClientNet is safe for concurrent use. Close stops its proxies.
type ClientNet struct {
	srv     *toxiproxy.ApiServer
	mu      sync.Mutex
	proxies []*toxiproxy.Proxy
	faults  []Fault // the fault applied to each node, FaultNone when healthy
}

// A Fault is what a ClientNet does to the traffic between its client and
// one node.
type Fault int

// The faults a ClientNet injects.
const (
	// FaultNone lets traffic through unchanged.
	FaultNone Fault = iota
	// FaultLatency delays every reply from the node (see ClientNet.Latency).
	FaultLatency
	// FaultBlackhole drops everything in both directions (ClientNet.Blackhole).
	FaultBlackhole
	// FaultDropReplies delivers requests but drops replies (ClientNet.DropReplies).
	FaultDropReplies
)

// String names the fault.
func (f Fault) String() string {
	switch f {
	case FaultNone:
		return "none"
	case FaultLatency:
		return "latency"
	case FaultBlackhole:
		return "blackhole"
	case FaultDropReplies:
		return "drop-replies"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// NewClientNet starts one proxy per upstream address (host:port, on
// loopback), each listening on its own free port of 127.0.0.1. On error the
// proxies already started are stopped.
func NewClientNet(upstreams []string) (*ClientNet, error) {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	n := &ClientNet{srv: srv, faults: make([]Fault, len(upstreams))}
	for i, up := range upstreams {
		p := toxiproxy.NewProxy(srv, fmt.Sprint("node", i), "127.0.0.1:0", up)
		if err := p.Start(); err != nil {
			n.Close()
			return nil, fmt.Errorf("clientnet: proxy to %s: %w", up, err)
		}
		n.proxies = append(n.proxies, p)
	}
	return n, nil
}

// Len returns the number of nodes.
func (n *ClientNet) Len() int { return len(n.proxies) }

// Addr returns the address at which this client reaches node i. It stays
// the same across faults and heals.
func (n *ClientNet) Addr(i int) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proxies[i].Listen
}

// Fault returns the fault currently applied to node i.
func (n *ClientNet) Fault(i int) Fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.faults[i]
}

// Latency delays every reply from node i by d, on open connections too.
// Each round trip then takes d longer. It replaces the fault on node i.
func (n *ClientNet) Latency(i int, d time.Duration) error {
	return n.set(i, FaultLatency, fmt.Sprintf(
		`{"name":"latency","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, d.Milliseconds()))
}

// Blackhole drops all traffic between this client and node i, in both
// directions, without closing connections: the client's commands and even
// its new connections' handshakes get no answer until its own timeouts,
// as with a silent partition. It replaces the fault on node i.
func (n *ClientNet) Blackhole(i int) error {
	return n.set(i, FaultBlackhole,
		`{"name":"blackhole-up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`,
		`{"name":"blackhole-down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
}

// DropReplies lets requests reach node i, which applies them, and drops its
// replies: a command sent on an open connection takes effect while the
// client sees a timeout. A new connection's handshake (go-redis sends HELLO
// before the first command) gets no reply either, so only connections that
// were in the pool before are affected this way; see WarmPool. It replaces
// the fault on node i.
func (n *ClientNet) DropReplies(i int) error {
	return n.set(i, FaultDropReplies,
		`{"name":"blackhole-down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
}

// Heal removes the fault on node i. Connections that went through a
// blackhole or dropped replies are closed (their replies are lost for good,
// and the client must not read a stale one); new ones work.
func (n *ClientNet) Heal(i int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.heal(i)
}

// HealAll removes every fault.
func (n *ClientNet) HealAll() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for i := range n.proxies {
		errs = append(errs, n.heal(i))
	}
	return errors.Join(errs...)
}

// Close stops every proxy and closes the connections through them.
func (n *ClientNet) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.proxies {
		p.Stop()
	}
}

// LatencyBothWays delays the traffic between n's client and node i by d in
// each direction (Latency delays only the replies), so that each round trip
// takes 2d longer. It replaces the fault on node i.
func (n *ClientNet) LatencyBothWays(i int, d time.Duration) error {
	return n.set(i, FaultLatency,
		fmt.Sprintf(`{"name":"latency","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, d.Milliseconds()),
		fmt.Sprintf(`{"name":"latency-up","type":"latency","stream":"upstream","attributes":{"latency":%d}}`, d.Milliseconds()))
}

// set replaces the fault on node i by f, made of the given toxics.
func (n *ClientNet) set(i int, f Fault, toxics ...string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.heal(i); err != nil {
		return err
	}
	n.faults[i] = f // from here on, heal undoes whatever was added
	for _, t := range toxics {
		if _, err := n.proxies[i].Toxics.AddToxicJson(strings.NewReader(t)); err != nil {
			return errors.Join(fmt.Errorf("clientnet: %s on node %d: %w", f, i, err), n.heal(i))
		}
	}
	n.faults[i] = f
	return nil
}

// heal removes node i's fault. Called with n.mu held.
//
// A latency toxic is removed from the live connections. A timeout toxic
// (blackhole, dropped replies) is not: toxiproxy v2.5.0 then closes the
// toxic without reconnecting the stage before it, whose goroutine blocks
// forever on the next chunk it forwards. Instead the proxy is stopped with
// its toxics in place, which closes its connections and lets every stage
// end, and a new one listens on the same address.
func (n *ClientNet) heal(i int) error {
	old := n.proxies[i]
	switch n.faults[i] {
	case FaultNone:
	case FaultBlackhole, FaultDropReplies:
		old.Stop()
		p := toxiproxy.NewProxy(n.srv, old.Name, old.Listen, old.Upstream)
		if err := p.Start(); err != nil {
			return fmt.Errorf("clientnet: heal node %d: %w", i, err)
		}
		n.proxies[i] = p
	default:
		old.Toxics.ResetToxics(context.Background())
	}
	n.faults[i] = FaultNone
	return nil
}

// WarmPool opens conns connections of c at once, completes their handshake
// with a PING, and returns them to c's pool, so that later commands find
// them ready instead of sending a handshake first. Use it before
// ClientNet.DropReplies, whose point is a command sent on an open
// connection. c should have PipelinePoolSize -1 (pipelines then use the
// same pool) and no MinIdleConns (whose connections skip the handshake
// until their first use).
func WarmPool(ctx context.Context, c *redis.Client, conns int) error {
	held := make([]*redis.Conn, 0, conns)
	defer func() {
		for _, cn := range held {
			_ = cn.Close()
		}
	}()
	for range conns {
		cn := c.Conn()
		held = append(held, cn)
		if err := cn.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("clientnet: warm %s: %w", c.Options().Addr, err)
		}
	}
	return nil
}
