package sim

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// What a hold excludes.
type holdKind int

const (
	exclusive holdKind = iota // a lock, a writer, a multi-name lock on each name
	shared                    // a reader: excludes writers only
	permit                    // one of limit permits
)

// A hold is one acquisition as its holder saw it, on the simulator's true
// clock: from when the call that acquired it returned to the end of its
// window, the earliest of its validity's end (Until), the holder learning
// of its loss (Done), and its release.
type hold struct {
	client  int
	res     string
	kind    holdKind
	limit   int // permits, for a permit
	who     string
	attempt time.Time // when the call that acquired it began
	start   time.Time
	end     time.Time
	fence   uint64    // 0 when not fenced
	token   string    // its token, as the nodes hold it (see truth.go)
	freed   time.Time // when its release returned (Do's: when Do did)
}

// history is every hold of a run, and the resources' counters.
type history struct {
	mu       sync.Mutex
	start    time.Time
	holds    []hold
	wipes    []time.Time         // when a node came back without its data
	early    []time.Time         // ... sooner than a TTL after it went down
	steps    []time.Time         // when a node's clock stepped
	faults   map[int][]time.Time // per node: restarts and clock steps
	verdicts []verdict
	quorums  map[string][]sighting // per name: which node held which token when (see Sim.sight)
	counters map[string]int        // written only by holders inside their window
	writes   map[string]int        // increments made
	excused  map[string]bool       // resources whose holds overlapped after an early restart (see overlaps)
}

func newHistory() *history {
	return &history{start: time.Now(), counters: map[string]int{}, writes: map[string]int{}, faults: map[int][]time.Time{},
		quorums: map[string][]sighting{}, excused: map[string]bool{}}
}

// wiped records that a node restarted without its data now: fencing
// tokens are promised only while a node that recorded the earlier token
// keeps its data (ALGORITHM.md, "Fencing tokens"). Early says it came back
// sooner than the operators' rule allows (a TTL after it went down): the
// holds of its locks are then exclusive no more, see overlaps.
func (h *history) wiped(early bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wipes = append(h.wipes, time.Now())
	if early {
		h.early = append(h.early, time.Now())
	}
}

// faulted records that node i restarted, or its clock stepped, now.
func (h *history) faulted(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults[i] = append(h.faults[i], time.Now())
}

// stepped records that a node's clock stepped now.
func (h *history) stepped() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.steps = append(h.steps, time.Now())
}

// steppedWithin reports whether a node's clock stepped from `from` to to.
// Called with h.mu held.
func (h *history) steppedWithin(from, to time.Time) bool {
	return slices.ContainsFunc(h.steps, func(t time.Time) bool { return !t.Before(from) && !t.After(to) })
}

// faultedBetween reports whether node i restarted or stepped its clock
// from from to to.
func (h *history) faultedBetween(i int, from, to time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.faults[i], func(t time.Time) bool { return !t.Before(from) && !t.After(to) })
}

// at formats t as the time since the run began.
func (h *history) at(t time.Time) time.Duration { return t.Sub(h.start).Round(time.Microsecond) }

func (h *history) add(x hold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holds = append(h.holds, x)
}

func (h *history) acquisitions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.holds)
}

func (h *history) read(res string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counters[res]
}

func (h *history) write(res string, v int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counters[res] = v
	h.writes[res]++
}

// check returns every violation of the guarantees in the history:
//   - no two holds of a resource overlap unless both are readers;
//   - no more permits overlap than the semaphore has;
//   - a fenced hold's token is greater than that of every fenced hold of
//     its name that was acquired before its own attempt began;
//   - no update of a counter was lost, unless holds of its resource
//     overlapped after an early restart (two holders may both write then:
//     the seed 127071, two nodes restarted empty within the TTL).
func (h *history) check() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	byRes := map[string][]hold{}
	for _, x := range h.holds {
		byRes[x.res] = append(byRes[x.res], x)
	}
	resources := make([]string, 0, len(byRes))
	for r := range byRes {
		resources = append(resources, r)
	}
	slices.Sort(resources)
	for _, r := range resources {
		hs := byRes[r]
		slices.SortFunc(hs, func(a, b hold) int { return a.start.Compare(b.start) })
		out = append(out, h.overlaps(r, hs)...)
		out = append(out, h.fences(r, hs)...)
	}
	for _, v := range h.verdicts {
		if why := h.untrue(v, byRes[v.hold.res]); why != "" {
			out = append(out, why)
		}
	}
	for r, n := range h.writes {
		if h.counters[r] != n && !h.excused[r] {
			out = append(out, fmt.Sprintf("%s: %d increments made, counter at %d: updates lost", r, n, h.counters[r]))
		}
	}
	return out
}

// overlaps finds holds, sorted by start, that were in force together
// against the rule of their kinds, unless a node restarted early (empty,
// sooner than a TTL after it went down) from the earlier one's attempt to
// the later one's start: the lock does not exclude that (ALGORITHM.md,
// "Restarts without persistence"), but its verdicts must tell it (see
// untrue).
func (h *history) overlaps(res string, hs []hold) []string {
	var out []string
	var active []hold
	for _, x := range hs {
		live := active[:0]
		for _, a := range active {
			if a.end.After(x.start) {
				live = append(live, a)
			}
		}
		active = live
		clashes, permits := h.against(res, x, active)
		out = append(out, clashes...)
		if x.kind == permit && permits > x.limit && !h.earlyBetween(earliest(active), x.start) {
			out = append(out, fmt.Sprintf("%s: %d permits held at %v, limit %d", res, permits, h.at(x.start), x.limit))
		}
		if x.end.After(x.start) {
			active = append(active, x)
		}
	}
	return out
}

// against compares hold x with the active holds, those in force at its
// start: it returns each that x's kind may not overlap, and the permits in
// force counting x's own.
func (h *history) against(res string, x hold, active []hold) (clashes []string, permits int) {
	permits = 1
	for _, a := range active {
		switch {
		case x.kind == permit && a.kind == permit:
			permits++
		case x.kind == shared && a.kind == shared:
		case h.earlyBetween(a.attempt, x.start):
			h.excused[res] = true
		default:
			clashes = append(clashes, fmt.Sprintf("%s: %s held it %v-%v while %s held it %v-%v", res,
				x.who, h.at(x.start), h.at(x.end), a.who, h.at(a.start), h.at(a.end)))
		}
	}
	return clashes, permits
}

// fences checks that fencing tokens increase along acquisitions, between
// two acquisitions with no node restarted without its data from the first
// one's grant to the second one's.
func (h *history) fences(res string, hs []hold) []string {
	var out []string
	for _, b := range hs {
		if b.fence == 0 {
			continue
		}
		for _, a := range hs {
			// A node wiped before b read the counters (at its grant, after
			// its attempt began) no longer kept the token it recorded.
			if a.fence == 0 || !a.start.Before(b.attempt) || a.fence < b.fence || h.wipedBetween(a.start, b.start) {
				continue
			}
			out = append(out, fmt.Sprintf("%s: %s got fence %d at %v, after %s got %d at %v",
				res, b.who, b.fence, h.at(b.start), a.who, a.fence, h.at(a.start)))
		}
	}
	return out
}

// earliest returns the earliest attempt of holds.
func earliest(hs []hold) time.Time {
	t := hs[0].attempt
	for _, x := range hs {
		t = minTime(t, x.attempt)
	}
	return t
}

func (h *history) earlyBetween(from, to time.Time) bool {
	return slices.ContainsFunc(h.early, func(w time.Time) bool { return w.After(from) && w.Before(to) })
}

func (h *history) wipedBetween(from, to time.Time) bool {
	for _, w := range h.wipes {
		if w.After(from) && w.Before(to) {
			return true
		}
	}
	return false
}

// The liveness bound. Once the faults heal and the clock guard's wait
// passes, a worker that holds none of its names for the rest of the run
// (3 s and two TTLs at least) has waited past the bound when, in that time,
// its names lay free for more than freeBound in total (nobody held them,
// yet it got no turn), or the other workers took them more than turnsBound
// times (its turn was passed over again and again). The rest of the run
// alone bounds nothing: holds are not bounded (a holder under Do renews, a
// paused one keeps its lease to its end), and behind three holders of two
// seconds each a fair queue makes a waiter wait 6 s. Measured over 76
// seeds (300000-300075), the waits that ended in a turn had at most 1.64 s
// of free time (a reader or writer of an RWMutex) and at most 72 turns of
// others (a worker taking both names of a multi-name lock, which holds of
// one name pass): the bounds catch a name nobody can take, and a waiter
// starved while others keep turning.
const (
	freeBound  = 2 * time.Second
	turnsBound = 64
)

// stalled returns the workloads of clients that held nothing from since to
// stop, the end of the run, and waited past the liveness bound.
func (h *history) stalled(clients int, workloads []string, since, stop time.Time) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for c := range clients {
		for _, w := range workloads {
			names := resources[w]
			served := slices.ContainsFunc(h.holds, func(x hold) bool {
				return x.client == c && x.end.After(since) && slices.Contains(names, x.res)
			})
			if served {
				continue
			}
			free, turns := h.waited(c, names, since, stop)
			if free > freeBound || turns > turnsBound {
				out = append(out, fmt.Sprintf("client %d's %s held nothing from %v to %v: its names lay free for %v, others took them %d times",
					c, w, h.at(since), h.at(stop), free.Round(time.Millisecond), turns))
			}
		}
	}
	return out
}

// waited returns how long, from since to stop, none of names was held, and
// how many acquisitions of them the other clients made. Called with h.mu
// held.
func (h *history) waited(client int, names []string, since, stop time.Time) (free time.Duration, turns int) {
	var spans [][2]time.Time
	acquired := map[[2]any]bool{} // a multi-name hold is one acquisition
	for _, x := range h.holds {
		if !slices.Contains(names, x.res) || !x.end.After(since) || !x.start.Before(stop) {
			continue
		}
		spans = append(spans, [2]time.Time{maxTime(x.start, since), minTime(x.end, stop)})
		if x.client != client && !x.start.Before(since) {
			acquired[[2]any{x.client, x.start}] = true
		}
	}
	slices.SortFunc(spans, func(a, b [2]time.Time) int { return a[0].Compare(b[0]) })
	at := since
	for _, sp := range spans {
		if sp[0].After(at) {
			free += sp[0].Sub(at)
		}
		at = maxTime(at, sp[1])
	}
	if stop.After(at) {
		free += stop.Sub(at)
	}
	return free, len(acquired)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
