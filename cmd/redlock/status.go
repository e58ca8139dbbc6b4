package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
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
	// A semaphore's node: its kind, permit count and live permits.
	Kind    string       `json:"kind,omitempty"` // "lock", "semaphore" or "readers"; absent when free or unreachable
	Permits int          `json:"permits,omitempty"`
	Holders []permitJSON `json:"holders,omitempty"`
}

// permitJSON is one live permit on a node in status --json.
type permitJSON struct {
	Holder    string `json:"holder"` // the token's first 8 characters
	TTLMillis int64  `json:"ttl_ms"`
}

// holderJSON is one holder of a semaphore across the nodes in status --json.
type holderJSON struct {
	Holder string `json:"holder"` // the token's first 8 characters
	Nodes  int    `json:"nodes"`  // how many nodes admitted it
	Quorum bool   `json:"quorum"` // admitted on a quorum: it holds a permit
}

// statusJSON is status --json's output.
type statusJSON struct {
	Name   string     `json:"name"`
	Locked bool       `json:"locked"` // one holder holds it on a quorum
	Holder string     `json:"holder,omitempty"`
	Held   int        `json:"held"`
	Nodes  []nodeJSON `json:"nodes"`
	Quorum int        `json:"quorum"`
	// What the name is, and for a semaphore its permit count, the quorum
	// a holder needs at that count, and its holders.
	Kind         string       `json:"kind,omitempty"` // "lock", "semaphore" or "readers"; absent when free everywhere
	Permits      int          `json:"permits,omitempty"`
	PermitQuorum int          `json:"permit_quorum,omitempty"`
	Holders      []holderJSON `json:"holders,omitempty"`
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
	if out.Kind == report.KindSemaphore || out.Kind == report.KindReaders {
		printSemaphore(stdout, inv.name, out)
	} else {
		printStatus(stdout, inv.name, out)
	}
	if err != nil {
		fmt.Fprintf(stderr, "redlock: status: %v\n", err)
	}
	return exitOK
}

// toJSON is s as `redlock status --json` prints it.
func toJSON(s *report.LockState) statusJSON {
	out := statusJSON{Name: s.Name, Locked: s.Locked(), Holder: prefix(s.Holder), Held: s.Held, Quorum: s.Quorum, Kind: s.Kind}
	for _, n := range s.Nodes {
		nj := nodeJSON{Addr: n.Addr, State: "free", Fence: n.Fence, Kind: n.Kind}
		switch {
		case n.Err != nil:
			nj.State, nj.Error = "unreachable", nodeCause(n.Err)
		case n.Held:
			nj.State, nj.TTLMillis, nj.Holder, nj.Reentrant, nj.Holds = "held", n.TTL.Milliseconds(), prefix(n.Holder), n.Reentrant, n.Holds
		case len(n.Permits) > 0:
			nj.State, nj.Permits = "held", n.PermitCount
			for _, p := range n.Permits {
				nj.Holders = append(nj.Holders, permitJSON{Holder: prefix(p.Token), TTLMillis: p.TTL.Milliseconds()})
			}
		}
		out.Nodes = append(out.Nodes, nj)
	}
	sem := s.Semaphore
	if s.Readers != nil {
		sem = s.Readers // Permits 0, Quorum the majority
	}
	if sem != nil {
		out.Permits, out.PermitQuorum = sem.Permits, sem.Quorum
		for _, h := range sem.Holders {
			out.Holders = append(out.Holders, holderJSON{Holder: prefix(h.Token), Nodes: h.Nodes, Quorum: sem.Quorum > 0 && h.Nodes >= sem.Quorum})
		}
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

// printSemaphore prints out, a semaphore (or an RWMutex's readers), as a
// table: one line per node with its live permits (readers), then a summary
// naming each holder and on how many nodes it was admitted.
func printSemaphore(stdout io.Writer, name string, out statusJSON) {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, n := range out.Nodes {
		switch {
		case n.State == "unreachable":
			fmt.Fprintf(tw, "%s\tunreachable\t%s\n", n.Addr, n.Error)
		case n.Kind == report.KindLock: // a lock where the others keep a semaphore
			fmt.Fprintf(tw, "%s\tlock\tttl %v\tholder %s\n", n.Addr, time.Duration(n.TTLMillis)*time.Millisecond, n.Holder)
		case len(n.Holders) == 0:
			fmt.Fprintf(tw, "%s\tfree\t\n", n.Addr)
		default:
			permits := make([]string, len(n.Holders))
			for i, p := range n.Holders {
				permits[i] = fmt.Sprintf("%s ttl %v", p.Holder, time.Duration(p.TTLMillis)*time.Millisecond)
			}
			count := fmt.Sprintf("%d of %d permits", len(n.Holders), n.Permits)
			if out.Kind == report.KindReaders {
				count = fmt.Sprintf("%d readers", len(n.Holders))
			}
			fmt.Fprintf(tw, "%s\theld\t%s\t%s\n", n.Addr, count, strings.Join(permits, ", "))
		}
	}
	_ = tw.Flush()
	held, holders := 0, make([]string, len(out.Holders))
	for i, h := range out.Holders {
		holders[i] = fmt.Sprintf("%s on %d", h.Holder, h.Nodes)
		if h.Quorum {
			held++
		} else {
			holders[i] += " (too few)"
		}
	}
	if out.Kind == report.KindReaders {
		fmt.Fprintf(stdout, "%s: read-locked by %d readers (quorum %d of %d nodes): %s\n",
			name, held, out.PermitQuorum, len(out.Nodes), strings.Join(holders, ", "))
		return
	}
	fmt.Fprintf(stdout, "%s: semaphore of %d permits, %d held (quorum %d of %d nodes): %s\n",
		name, out.Permits, held, out.PermitQuorum, len(out.Nodes), strings.Join(holders, ", "))
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
	if ne, ok := err.(*report.NodeError); ok { //nolint:errorlint // the library sets it directly
		return ne.Err.Error()
	}
	return err.Error()
}
