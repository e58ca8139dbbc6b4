package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/redlock-go/redlock/redlock"
)

// opTimeout bounds status and unlock as a whole; each node is bounded by
// opNodeTimeout.
const (
	opTimeout     = 10 * time.Second
	opNodeTimeout = time.Second
)

// prefix is how much of a holder's token is shown: enough to tell holders
// apart, too little to act as the holder.
func prefix(token string) string {
	if len(token) > 8 {
		return token[:8]
	}
	return token
}

// nodeJSON is one node in status --json.
type nodeJSON struct {
	Addr      string `json:"addr"`
	State     string `json:"state"` // "held", "free" or "unreachable"
	TTLMillis int64  `json:"ttl_ms,omitempty"`
	Holder    string `json:"holder,omitempty"` // the token's first 8 characters
	Reentrant bool   `json:"reentrant,omitempty"`
	Holds     int    `json:"holds,omitempty"`
	Fence     uint64 `json:"fence"`
	Error     string `json:"error,omitempty"`
}

// statusJSON is status --json's output.
type statusJSON struct {
	Name   string     `json:"name"`
	Locked bool       `json:"locked"` // one holder holds it on a quorum
	Holder string     `json:"holder,omitempty"`
	Held   int        `json:"held"`
	Nodes  []nodeJSON `json:"nodes"`
	Quorum int        `json:"quorum"`
}

// status is `redlock status`: what every node holds for the name, as a
// table or as JSON.
func status(inv *invocation, stdout, stderr io.Writer) int {
	rl, closeAll, err := connect(inv, redlock.WithNodeTimeout(opNodeTimeout))
	if err != nil {
		return connectFailed(stderr, "status", err)
	}
	defer closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	s, err := rl.Inspect(ctx, inv.name)
	if s == nil {
		fmt.Fprintf(stderr, "redlock: status: %v\n", err)
		return exitSoftware
	}
	out := toJSON(s)
	if inv.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return exitSoftware
		}
		return exitOK
	}
	printStatus(stdout, inv.name, out)
	if err != nil {
		fmt.Fprintf(stderr, "redlock: status: %v\n", err)
	}
	return exitOK
}

// toJSON is s as `redlock status --json` prints it.
func toJSON(s *redlock.LockState) statusJSON {
	out := statusJSON{Name: s.Name, Locked: s.Locked(), Holder: prefix(s.Holder), Held: s.Held, Quorum: s.Quorum}
	for _, n := range s.Nodes {
		nj := nodeJSON{Addr: n.Addr, State: "free", Fence: n.Fence}
		switch {
		case n.Err != nil:
			nj.State, nj.Error = "unreachable", nodeCause(n.Err)
		case n.Held:
			nj.State, nj.TTLMillis, nj.Holder, nj.Reentrant, nj.Holds = "held", n.TTL.Milliseconds(), prefix(n.Holder), n.Reentrant, n.Holds
		}
		out.Nodes = append(out.Nodes, nj)
	}
	return out
}

// printStatus prints out as a table, one line per node, and a summary.
func printStatus(stdout io.Writer, name string, out statusJSON) {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, n := range out.Nodes {
		switch n.State {
		case "held":
			holder := "holder " + n.Holder
			if n.Reentrant {
				holder += fmt.Sprintf(" (reentrant, %d holds)", n.Holds)
			}
			fmt.Fprintf(tw, "%s\theld\tttl %v\t%s\tfence %d\n", n.Addr, time.Duration(n.TTLMillis)*time.Millisecond, holder, n.Fence)
		case "free":
			fmt.Fprintf(tw, "%s\tfree\t\t\tfence %d\n", n.Addr, n.Fence)
		default:
			fmt.Fprintf(tw, "%s\tunreachable\t%s\n", n.Addr, n.Error)
		}
	}
	_ = tw.Flush()
	summary := "free"
	switch {
	case out.Locked:
		summary = "locked by " + out.Holder
	case out.Held > 0:
		summary = "not locked: no holder has a quorum"
	}
	fmt.Fprintf(stdout, "%s: held on %d of %d nodes (quorum %d): %s\n", name, out.Held, len(out.Nodes), out.Quorum, summary)
}

func unlock(inv *invocation, stdout, stderr io.Writer) int {
	rl, closeAll, err := connect(inv, redlock.WithNodeTimeout(opNodeTimeout))
	if err != nil {
		return connectFailed(stderr, "unlock", err)
	}
	defer closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	out, err := rl.ForceUnlock(ctx, inv.name)
	if out == nil {
		fmt.Fprintf(stderr, "redlock: unlock: %v\n", err)
		return exitSoftware
	}
	deleted, failed := 0, 0
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, fr := range out {
		switch {
		case fr.Err != nil:
			failed++
			fmt.Fprintf(tw, "%s\tunreachable\t%s\n", fr.Addr, nodeCause(fr.Err))
		case fr.Deleted:
			deleted++
			fmt.Fprintf(tw, "%s\tdeleted\tholder %s\n", fr.Addr, prefix(fr.Holder))
		default:
			fmt.Fprintf(tw, "%s\tnot held\t\n", fr.Addr)
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(stdout, "%s: deleted on %d of %d nodes", inv.name, deleted, len(out))
	if failed > 0 {
		fmt.Fprintf(stdout, "; %d unreachable (the lock may be held there until its TTL passes)", failed)
	}
	fmt.Fprintln(stdout, "; fencing counters kept")
	if err != nil {
		fmt.Fprintf(stderr, "redlock: unlock: %v\n", err)
	}
	return exitOK
}

// nodeCause is a node error's cause, without the "node i (addr)" prefix
// the line already shows.
func nodeCause(err error) string {
	if ne, ok := err.(*redlock.NodeError); ok { //nolint:errorlint // the library sets it directly
		return ne.Err.Error()
	}
	return err.Error()
}
