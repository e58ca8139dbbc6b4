package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// closeWithin bounds how long redlock waits, before it exits, for calls
// still in flight to nodes (releases included): a silent node is not worth
// waiting for longer.
const closeWithin = 3 * time.Second

// connect opens one client per node and a Redlock over them. The returned
// function closes both, waiting (at most closeWithin) for the node calls
// still in flight.
func connect(inv *invocation, opts ...redlock.Option) (*redlock.Redlock, func(), error) {
	clients := make([]redis.UniversalClient, len(inv.nodes))
	for i, o := range inv.nodes {
		if o.DialerRetries == 0 { // URLs cannot set it
			// One dial per command: a node that refuses connections is
			// reported as such at once, instead of as a node timeout
			// after go-redis' five dials.
			o.DialerRetries = 1
		}
		clients[i] = redis.NewClient(o)
	}
	closeClients := func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
	rl, err := redlock.New(clients, opts...)
	if err != nil {
		closeClients()
		return nil, nil, err
	}
	return rl, func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeWithin)
		defer cancel()
		_ = rl.Close(ctx) // past the bound, the calls die with the process
		closeClients()
	}, nil
}

// connectFailed reports a failure of connect: bad nodes are a usage error.
func connectFailed(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "redlock: %s: %v\n", cmd, err)
	if errors.Is(err, redlock.ErrInvalidArgument) {
		return exitUsage
	}
	return exitSoftware
}

// nodeTimeout is how long an operation waits for one node. run keeps it
// well below the TTL; status and unlock may wait longer for a far node.
func nodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 50*time.Millisecond), 500*time.Millisecond, ttl/2)
}

// describeNodeErrors lists, one per line, the nodes that failed in err.
func describeNodeErrors(w io.Writer, err error) {
	for _, ne := range report.NodeErrors(err) {
		fmt.Fprintf(w, "  node %d (%s): %v\n", ne.Index, ne.Addr, ne.Err)
	}
}
