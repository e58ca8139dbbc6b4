package quorum

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// The clock guard. Redis expires a key by its own wall clock: a node whose
// clock steps forward forgets at once the locks it granted, and mutual
// exclusion rests on few enough nodes doing so. Every vote (a grant, an
// extension) arrives with the node's time (node.Timed), and the guard
// compares it with this process's clock:
//
//   - against the process's wall clock: a node whose clock is more than the
//     tolerance away from it does not vote;
//   - against the process's monotonic clock, between two replies of the
//     node: a clock that moved by more than the tolerance against it has
//     jumped, and the node does not vote either.
//
// Each allowance is widened by half of each exchange's round trip (when,
// within it, the node read its clock is unknown). A node that stopped
// voting votes again only once it has agreed for the longest TTL in use
// (the keys it may have expired early are gone by then, on every node).
// Each such episode is reported once. A jump also makes every lease that
// counted the node's vote recompute what it holds (see clockJumped).
//
// Every vote carries the node's time, read after the grant: a node whose
// clock jumped forward expired its keys early, and only a reading taken
// with the vote stops it from granting the lock again while the lease
// whose key it dropped still runs. (A grant that skipped the reading when
// the guard's last one was under 100 ms old let a second client count the
// jumped node's vote within those 100 ms: two holders, which the simulator
// found, seed 60124.)

// ErrClockJump marks a node that does not vote because its clock jumped,
// or disagrees with this process's; the facade exports it.
var ErrClockJump = errors.New("redlock: node clock jumped or disagrees")

// DefaultClockTolerance is how far a node's clock may be from this
// process's, or move against it between two replies, and still vote; the
// facade exports it.
const DefaultClockTolerance = time.Second

// ClockWatchEvery is how often the nodes' clocks are read while this
// process holds a lease, so that a jump is found, and the leases that
// counted the node recompute, even when nothing else is sent.
const ClockWatchEvery = time.Second

// ClockGuard keeps, per node, what its last replies said of its clock.
type ClockGuard struct {
	Tolerance time.Duration
	longest   atomic.Int64 // the longest TTL in use, in nanoseconds
	// tell is told why a node stops voting, once per episode; jumped, of
	// a forward jump. Either may be nil.
	tell   func(i int, err error)
	jumped func(i int)

	mu    sync.Mutex
	nodes []nodeClock
	// counts is every node's jumps, as JumpsOf returns them: a slice
	// replaced, never changed, when a jump is counted (under mu), so that
	// the grants and extensions that read it take neither mu nor a copy.
	counts atomic.Pointer[[]int]
}

// nodeClock is what the guard knows of one node's clock.
type nodeClock struct {
	seen   bool
	at     time.Time     // this process's clock (monotonic) at the middle of the last exchange
	node   time.Time     // the node's clock then
	slack  time.Duration // half that exchange's round trip
	offset time.Duration // the node's clock minus this process's wall clock
	// refused is why the node does not vote; nil while it does. agreed is
	// when it agreed again since (zero: not yet).
	refused error
	agreed  time.Time
	// jumps counts the forward jumps found (see Jumps); jumpedAt is when
	// the last jump, either way, was.
	jumps    int
	jumpedAt time.Time
}

// NewClockGuard returns the guard of n nodes, with clocks trusted within
// tolerance, telling tell why a node stops voting and jumped of a node
// whose clock jumped ahead (either nil: no one).
func NewClockGuard(n int, tolerance time.Duration, tell func(i int, err error), jumped func(i int)) *ClockGuard {
	g := &ClockGuard{Tolerance: tolerance, nodes: make([]nodeClock, n), tell: tell, jumped: jumped}
	counts := make([]int, n)
	g.counts.Store(&counts)
	return g
}

// InUse records that a lease of ttl may be held.
func (g *ClockGuard) InUse(ttl time.Duration) {
	for {
		old := g.longest.Load()
		if int64(ttl) <= old || g.longest.CompareAndSwap(old, int64(ttl)) {
			return
		}
	}
}

// Check reads node i's time at, in a reply to a request sent at sent and
// received at got (this process's clock), and returns nil when the node
// may vote, or why not.
func (g *ClockGuard) Check(i int, sent, got, at time.Time) error {
	mid := sent.Add(got.Sub(sent) / 2)
	slack := got.Sub(sent) / 2
	g.mu.Lock()
	nc := &g.nodes[i]
	counted := nc.jumps
	why, jumped := nc.judge(g.Tolerance, mid, slack, at)
	if nc.jumps != counted {
		counts := slices.Clone(*g.counts.Load())
		counts[i] = nc.jumps
		g.counts.Store(&counts)
	}
	tell, why := nc.episode(why, mid, time.Duration(g.longest.Load()))
	g.mu.Unlock()
	if tell != nil && g.tell != nil {
		g.tell(i, tell)
	}
	if jumped && g.jumped != nil {
		g.jumped(i)
	}
	return why
}

// judge reads the node's time at, with this process's clock at mid (give
// or take slack), against what it knew of the node: why it may not vote
// on this reply's evidence alone (nil: it may), and whether its clock
// jumped.
func (nc *nodeClock) judge(tolerance time.Duration, mid time.Time, slack time.Duration, at time.Time) (error, bool) {
	offset := at.Sub(mid.Round(0)) // Round(0): the wall clock reading
	var why error
	jumped := false
	if nc.seen {
		elapsed := mid.Sub(nc.at) // monotonic
		if moved := at.Sub(nc.node) - elapsed; moved.Abs() > tolerance+slack+nc.slack {
			why = fmt.Errorf("%w: the node's clock moved %v against this process's in %v", ErrClockJump, moved.Round(time.Millisecond), elapsed.Round(time.Millisecond))
			jumped = true
			if moved > 0 {
				nc.jumps++
			}
			nc.jumpedAt = mid
		}
	}
	if why == nil && offset.Abs() > tolerance+slack {
		why = fmt.Errorf("%w: the node's clock is %v from this process's", ErrClockJump, offset.Round(time.Millisecond))
	}
	nc.seen, nc.at, nc.node, nc.slack, nc.offset = true, mid, at, slack, offset
	return why, jumped
}

// episode carries the node's episode of not voting on: one starts with a
// reply that may not vote (tell is then its cause, to be told once), and
// ends once the node has agreed for longest; until then why stays set.
func (nc *nodeClock) episode(why error, mid time.Time, longest time.Duration) (tell, stillWhy error) {
	switch {
	case why != nil:
		if nc.refused == nil {
			tell = why // a new episode
		}
		nc.refused, nc.agreed = why, time.Time{}
		return tell, why
	case nc.refused == nil:
		return nil, nil
	}
	if nc.agreed.IsZero() {
		nc.agreed = mid
	}
	if mid.Sub(nc.agreed) >= longest {
		nc.refused, nc.agreed = nil, time.Time{} // the episode is over
		return nil, nil
	}
	return nil, fmt.Errorf("%w: it agrees again since %v, and votes again once it has for the longest TTL, %v (%w)",
		ErrClockJump, mid.Sub(nc.agreed).Round(time.Millisecond), longest, nc.refused)
}

// Refused returns why node i does not vote now, nil when it does.
func (g *ClockGuard) Refused(i int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	nc := g.nodes[i]
	if nc.refused != nil && !nc.agreed.IsZero() {
		return fmt.Errorf("%w: it agrees again since %v, and votes again once it has for the longest TTL, %v (%w)",
			ErrClockJump, nc.at.Sub(nc.agreed).Round(time.Millisecond), time.Duration(g.longest.Load()), nc.refused)
	}
	return nc.refused
}

// Jumps returns how many forward jumps of node i were found so far: jumps
// of its clock ahead of this process's, each of which may have expired its
// keys early. A clock stepped back keeps the keys longer than their TTL,
// which costs no holder its lock: it is not counted (the node still stops
// voting for a while, see Check).
func (g *ClockGuard) Jumps(i int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nodes[i].jumps
}

// JumpsOf returns how many forward jumps of each node were found so far,
// as Jumps counts them; the slice is shared: the caller must not change it.
func (g *ClockGuard) JumpsOf() []int { return *g.counts.Load() }

// ProcessSkew reports whether this process's own wall clock is the one
// that is off: every node seen is more than the tolerance away from it,
// and within the tolerance of each other. It returns the nodes' median
// offset.
func (g *ClockGuard) ProcessSkew() (time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var offsets []time.Duration
	for _, nc := range g.nodes {
		if !nc.seen {
			continue
		}
		if nc.offset.Abs() <= g.Tolerance+nc.slack {
			return 0, false
		}
		offsets = append(offsets, nc.offset)
	}
	if len(offsets) < 2 {
		return 0, false
	}
	slices.Sort(offsets)
	if offsets[len(offsets)-1]-offsets[0] > g.Tolerance {
		return 0, false
	}
	return offsets[len(offsets)/2], true
}

// clocked passes node i's reply to op, a request sent at sent and
// answered at at, through the guard: a vote from a node that may not vote
// becomes an error wrapping ErrClockJump (the node may hold the token: an
// attempt undoes it there). A vote that carries no time (a node that
// answered without it: one laid out as a Cluster or a Ring, a user refused
// TIME, a batch whose TIME failed) tells the guard nothing, but it does
// not count from a node the guard refuses: that node may have expired keys
// early, whatever this reply says (the simulator's seed 200412, two
// writers at once).
func (p *Pool) clocked(i int, sent, at time.Time, op node.Op, rep node.Reply) node.Reply {
	if p.guard == nil || rep.Err != nil {
		return rep
	}
	if rep.Time.IsZero() {
		if _, vote := op.(node.Timed); vote && rep.OK {
			if why := p.guard.Refused(i); why != nil {
				return node.Reply{Err: why, Value: rep.Value}
			}
		}
		return rep
	}
	if why := p.guard.Check(i, sent, at, rep.Time); why != nil && rep.OK {
		return node.Reply{Err: why, Value: rep.Value, Time: rep.Time}
	}
	return rep
}
