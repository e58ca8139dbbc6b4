package main

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"
)

// wanResults is what one placement's runs saw, by implementation: the
// uncontended Lock and Unlock durations per site, and the contended runs.
type wanResults struct {
	alone       map[string][3][2][]time.Duration
	aloneFailed map[string]int // uncontended pairs whose Lock or Unlock failed
	runs        map[string][]*contendedRun
	// renewHeld and renewErrs are the renewal phase's, per site (see
	// wanNet.renewal).
	renewHeld [3]time.Duration
	renewErrs [3]error
}

func wanPreamble() string {
	return fmt.Sprintf(`# Across data centres (make bench-wan)

Sites A, B and C, one-way delays A-B %v, A-C %v, B-C %v, none inside a site. Each node is a
redis-server on this machine; a client reaches a node of another site through a delay line (an
in-process proxy that delivers every chunk that long after it read it, both ways), one per client site
and node. Every client is at go-redis' default options, each library at its defaults (redlock-go:
WithTTL(%v); redsync: WithExpiry(%v)). %d Go threads on %d cores.

Renewal: from every site at once, a redlock-go Do with a %v TTL whose function holds the lock for
%v (-wan.hold; the extensions must each reach a quorum in time, across the sites).

Floors: a Lock or an Unlock from site S needs a majority's replies, so it takes at least the
majority-th smallest round trip from S. A hand-over from a holder in X to a waiter in Y (the
holder's Unlock called to the waiter's Lock returning) needs the release to reach a node k and k to
tell the waiter, on a majority of nodes: at least the majority-th smallest d(X,k) + d(k,Y).

Uncontended: %d lock+unlock pairs on distinct names per site, one after another, after five that
dial the connections (not counted). Contended: one contender per process (its own lock client and
node clients), sites as listed, looping Lock (bounded by %v), a %v hold, Unlock on one name, %v per
run, %d interleaved runs per library. A Lock that reached its bound is a failed Lock. No two holds
overlapped in any run (checked).

`, wanDelay[0][1], wanDelay[0][2], wanDelay[1][2], ttl, ttl, runtime.GOMAXPROCS(0), runtime.NumCPU(),
		renewTTL, *renewHold, wanPairs, wanLockWait, wanHold, *duration, *rounds)
}

// table is the placement's section of WAN.md.
func (r *wanResults) table(p placement) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", p.name)
	b.WriteString("```\n" + p.drawing() + "```\n\n")
	b.WriteString("Uncontended, per client site (ms; ratio: p50 to the floor):\n\n")
	b.WriteString("| site | library | Lock p50 | Lock p99 | Unlock p50 | Unlock p99 | floor | Lock ratio | Unlock ratio |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for s := range wanSites {
		floor := p.lockFloor(s)
		for _, im := range implementations {
			a := r.alone[im.name][s]
			fmt.Fprintf(&b, "| %s | %s | %.1f | %.1f | %.1f | %.1f | %.0f | %.2fx | %.2fx |\n", wanSites[s], im.name,
				quantileMs(a[0], 0.5), quantileMs(a[0], 0.99), quantileMs(a[1], 0.5), quantileMs(a[1], 0.99), ms(floor),
				quantileMs(a[0], 0.5)/ms(floor), quantileMs(a[1], 0.5)/ms(floor))
		}
	}
	for _, im := range implementations {
		if n := r.aloneFailed[im.name]; n > 0 {
			fmt.Fprintf(&b, "\n%s: %d uncontended pairs failed (left out of the figures).\n", im.name, n)
		}
	}
	r.renewalLine(&b)
	r.contendedTable(&b, p)
	r.longestWaits(&b)
	r.transitTable(&b, p)
	return b.String()
}

// renewalLine writes what the renewal phase saw to b.
func (r *wanResults) renewalLine(b *strings.Builder) {
	if *renewHold <= 0 {
		return
	}
	fmt.Fprintf(b, "\nRenewal: a redlock-go Do from every site at once, TTL %v, holding %v:", renewTTL, *renewHold)
	for s, name := range wanSites {
		switch {
		case r.renewErrs[s] != nil:
			fmt.Fprintf(b, " %s lost it after %v (%v);", name, r.renewHeld[s].Round(time.Millisecond), r.renewErrs[s])
		default:
			fmt.Fprintf(b, " %s held it throughout;", name)
		}
	}
	b.WriteString("\n")
}

// contendedTable writes the contended runs' summary to b.
func (r *wanResults) contendedTable(b *strings.Builder, p placement) {
	b.WriteString("\nContended, contenders in sites " + p.contenderSites() + ":\n\n")
	b.WriteString("| library | acquisitions/s, per run | failed Locks | longest wait (ms) | largest site share (x mean) | transit p50 (ms) | transit p99 (ms) |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|\n")
	for _, im := range implementations {
		runs := r.runs[im.name]
		var rates []string
		failed, longest := 0, time.Duration(0)
		var all []time.Duration
		for _, run := range runs {
			rates = append(rates, fmt.Sprintf("%.1f", float64(len(run.holds))/run.took.Seconds()))
			failed += run.failed
			for _, h := range run.holds {
				longest = max(longest, h.locked.Sub(h.called))
			}
			for _, t := range run.transits() {
				all = append(all, t.d)
			}
		}
		fmt.Fprintf(b, "| %s | %s | %d | %.0f | %.2f | %.1f | %.1f |\n", im.name, strings.Join(rates, ", "), failed,
			ms(longest), largestShare(p, runs), quantileMs(all, 0.5), quantileMs(all, 0.99))
	}
}

// longestWaits writes to b, for each library, its three longest waits
// (a Lock called to its return) and what happened during each: the holds
// of others that began and ended inside it (turns passed), and how long
// the lock lay between holders (from an Unlock called to the next Lock
// returning, the wait's own included). Turns passed with little time
// between holders is a waiter passed over; much time between holders is
// a lock that lay free while someone waited.
func (r *wanResults) longestWaits(b *strings.Builder) {
	b.WriteString("\nLongest waits (site, ms; holds of others inside the wait; ms the lock lay between holders during it):\n\n")
	for _, im := range implementations {
		type wait struct {
			site        int
			d, between  time.Duration
			turnsPassed int
		}
		var ws []wait
		for _, run := range r.runs[im.name] {
			for i, h := range run.holds {
				w := wait{site: h.site, d: h.locked.Sub(h.called)}
				for j := i - 1; j >= 0; j-- {
					o := run.holds[j]
					if o.locked.Before(h.called) {
						break
					}
					w.turnsPassed++
				}
				for j := 1; j <= i; j++ {
					prev, next := run.holds[j-1], run.holds[j]
					from, to := prev.unlocking, next.locked
					if from.Before(h.called) {
						from = h.called
					}
					if to.After(from) && !next.locked.Before(h.called) {
						w.between += to.Sub(from)
					}
				}
				ws = append(ws, w)
			}
		}
		slices.SortFunc(ws, func(a, b wait) int { return cmp.Compare(b.d, a.d) })
		var parts []string
		for _, w := range ws[:min(3, len(ws))] {
			parts = append(parts, fmt.Sprintf("%s %.0f; %d; %.0f", wanSites[w.site], ms(w.d), w.turnsPassed, ms(w.between)))
		}
		fmt.Fprintf(b, "- %s: %s\n", im.name, strings.Join(parts, " / "))
	}
}

// transitTable writes the hand-overs by site pair to b.
func (r *wanResults) transitTable(b *strings.Builder, p placement) {
	b.WriteString("\nTransit by site pair (holder's site → next holder's site; ms; ratio: p50 to the floor):\n\n")
	b.WriteString("| pair | floor |")
	for _, im := range implementations {
		fmt.Fprintf(b, " %s: n, p50, p99, ratio |", im.name)
	}
	b.WriteString("\n|---|--:|")
	for range implementations {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for x := range wanSites {
		for y := range wanSites {
			if !p.hasContender(x) || !p.hasContender(y) {
				continue
			}
			floor := p.transitFloor(x, y)
			fmt.Fprintf(b, "| %s→%s | %.0f |", wanSites[x], wanSites[y], ms(floor))
			for _, im := range implementations {
				ds := r.pairTransits(im.name, x, y)
				if len(ds) == 0 {
					b.WriteString(" 0 |")
					continue
				}
				fmt.Fprintf(b, " %d, %.1f, %.1f, %.2fx |", len(ds), quantileMs(ds, 0.5), quantileMs(ds, 0.99),
					quantileMs(ds, 0.5)/ms(floor))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\n")
}

// pairTransits returns the hand-overs of impl's runs from site x to site y.
func (r *wanResults) pairTransits(impl string, x, y int) []time.Duration {
	var ds []time.Duration
	for _, run := range r.runs[impl] {
		for _, t := range run.transits() {
			if t.from == x && t.to == y {
				ds = append(ds, t.d)
			}
		}
	}
	return ds
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// transit is one hand-over: from the site of a holder to that of the
// next, and how long from the one's Unlock call to the other's Lock
// returning.
type transit struct {
	from, to int
	d        time.Duration
}

// transits returns the run's hand-overs, between holds one after the
// other: those where the next Lock returned after the Unlock was called
// (a Lock that returned before had its lock from an earlier release).
func (run *contendedRun) transits() []transit {
	var out []transit
	for i := 1; i < len(run.holds); i++ {
		prev, next := run.holds[i-1], run.holds[i]
		if d := next.locked.Sub(prev.unlocking); d >= 0 {
			out = append(out, transit{prev.site, next.site, d})
		}
	}
	return out
}

// largestShare is the largest share of the acquisitions per contender of
// one site, over the mean per contender, across runs.
func largestShare(p placement, runs []*contendedRun) float64 {
	var per [3]int
	total := 0
	for _, run := range runs {
		for _, h := range run.holds {
			per[h.site]++
			total++
		}
	}
	if total == 0 {
		return 0
	}
	mean := float64(total) / float64(len(p.contenders))
	largest := 0.0
	for s := range wanSites {
		if n := p.count(s); n > 0 {
			largest = max(largest, float64(per[s])/float64(n)/mean)
		}
	}
	return largest
}

// count returns how many contenders p has in site s.
func (p placement) count(s int) int {
	n := 0
	for _, c := range p.contenders {
		if c == s {
			n++
		}
	}
	return n
}

func (p placement) hasContender(s int) bool { return p.count(s) > 0 }

func (p placement) contenderSites() string {
	var out []string
	for _, s := range p.contenders {
		out = append(out, wanSites[s])
	}
	return strings.Join(out, " ")
}

// drawing draws the sites, their nodes and contenders, and the delays.
func (p placement) drawing() string {
	var b strings.Builder
	for s, name := range wanSites {
		var nodes []string
		for i, k := range p.nodes {
			if k == s {
				nodes = append(nodes, fmt.Sprint("n", i))
			}
		}
		fmt.Fprintf(&b, "site %s: nodes %-14s contenders %d\n", name, strings.Join(nodes, " "), p.count(s))
	}
	fmt.Fprintf(&b, "one-way: A-B %v, A-C %v, B-C %v\n", wanDelay[0][1], wanDelay[0][2], wanDelay[1][2])
	return b.String()
}
