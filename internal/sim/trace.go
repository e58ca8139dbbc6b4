package sim

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"
)

// A trace is every request each node received, with its fake time and
// the client it came from: two runs of one seed are the same run when
// their traces are equal. The requests a node received at one instant
// count in the order of their text: the order in which the runtime ran
// the goroutines that sent them is no part of a seed's run (and two nodes'
// requests are never ordered). It keeps a hash per node, and the requests
// themselves when asked to, to show where two runs part.
type trace struct {
	mu    sync.Mutex
	start time.Time
	keep  bool
	n     int
	nodes []nodeTrace
}

type nodeTrace struct {
	sum   uint64
	at    time.Duration // the instant of now
	now   []string      // the requests of that instant, not yet in sum
	lines []string
}

func newTrace(nodes int, keep bool) *trace {
	return &trace{start: time.Now(), keep: keep, nodes: make([]nodeTrace, nodes)}
}

func (t *trace) add(l *link, frame []byte) {
	at := time.Since(t.start)
	line := fmt.Sprintf("%v client %d: %q", at, l.client, canonical(frame))
	t.mu.Lock()
	defer t.mu.Unlock()
	nt := &t.nodes[l.node.idx]
	if at != nt.at {
		t.flush(nt)
		nt.at = at
	}
	nt.now = append(nt.now, line)
	t.n++
}

// flush adds the requests of nt's last instant to its hash, in order.
// Called with t.mu held.
func (t *trace) flush(nt *nodeTrace) {
	slices.Sort(nt.now)
	for _, line := range nt.now {
		h := fnv.New64a()
		h.Write([]byte(line))
		nt.sum = nt.sum*1099511628211 ^ h.Sum64()
		if t.keep {
			if len(line) > 300 {
				line = line[:300] + "…"
			}
			nt.lines = append(nt.lines, line)
		}
	}
	nt.now = nt.now[:0]
}

// canonical is frame with the channels of a SUBSCRIBE in order: go-redis
// subscribes again to the channels of a map when it reconnects.
func canonical(frame []byte) []byte {
	args := bytes.Split(frame, []byte("\r\n"))
	// *n, then $len and the value of each argument.
	if len(args) < 5 || !bytes.EqualFold(args[2], []byte("subscribe")) {
		return frame
	}
	var chans [][]byte
	for i := 4; i+1 < len(args); i += 2 {
		chans = append(chans, args[i])
	}
	slices.SortFunc(chans, bytes.Compare)
	return append([]byte("subscribe "), bytes.Join(chans, []byte(" "))...)
}

// digest is the trace's length and hash, as one word: "requests.hash".
func (t *trace) digest() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := fnv.New64a()
	for i := range t.nodes {
		t.flush(&t.nodes[i])
		fmt.Fprint(h, t.nodes[i].sum)
	}
	return fmt.Sprintf("%d.%016x", t.n, h.Sum64())
}

// parting returns where t and u part: the node, the index of the first
// request that differs, and that request in each (both empty if they do
// not part).
func (t *trace) parting(u *trace) (node, at int, mine, theirs string) {
	t.digest() // flushes
	u.digest()
	for i := range t.nodes {
		a, b := t.nodes[i].lines, u.nodes[i].lines
		j := 0
		for j < len(a) && j < len(b) && a[j] == b[j] {
			j++
		}
		if j < len(a) || j < len(b) {
			return i, j, around(a, j), around(b, j)
		}
	}
	return -1, 0, "", ""
}

// around is the request i of lines, after the three before it.
func around(lines []string, i int) string {
	var out []string
	for j := max(0, i-3); j <= i; j++ {
		if j < len(lines) {
			out = append(out, lines[j])
		} else {
			out = append(out, "(the end)")
		}
	}
	return strings.Join(out, "\n    ")
}
