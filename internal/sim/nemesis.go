package sim

import (
	"math/rand/v2"
	"slices"
	"time"
)

// An undo is a fault's end, due at a time.
type undo struct {
	at   time.Time
	what string
	do   func()
}

// nemesis inflicts faults drawn from rng for d, each ended after its own
// time; faults still on at the end are left for heal.
func (s *Sim) nemesis(rng *rand.Rand, d time.Duration) {
	end := time.Now().Add(d)
	s.log.add("%s", s.cfg)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(20+rng.IntN(280)) * time.Millisecond)
		s.runDue(false)
		s.inflict(rng)
	}
}

// heal ends every fault, each at its own time (a node restarted empty
// stays down at least a TTL, as the operators' rule for restarts without
// persistence asks); a client's pause that waits for its next request is
// called off, and one that began so ends now.
func (s *Sim) heal() {
	s.runDue(true)
	s.resumeAll()
	s.log.add("healed")
}

// runDue runs the undos that are due, or all of them in order, sleeping
// until each is due, when all is set.
func (s *Sim) runDue(all bool) {
	slices.SortFunc(s.undos, func(a, b undo) int { return a.at.Compare(b.at) })
	for len(s.undos) > 0 {
		u := s.undos[0]
		if wait := time.Until(u.at); wait > 0 {
			if !all {
				return
			}
			time.Sleep(wait)
		}
		s.undos = s.undos[1:]
		s.log.add("%s", u.what)
		u.do()
	}
}

func (s *Sim) later(d time.Duration, what string, do func()) {
	s.undos = append(s.undos, undo{at: time.Now().Add(d), what: what, do: do})
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// inflict starts one fault drawn from rng.
func (s *Sim) inflict(rng *rand.Rand) {
	i := rng.IntN(len(s.nodes))
	n := s.nodes[i]
	ttl := s.cfg.TTL
	switch rng.IntN(7) {
	case 0:
		if n.isPaused() {
			return
		}
		d := between(rng, 10*time.Millisecond, 1500*time.Millisecond)
		s.log.add("pause node %d for %v", i, d)
		n.pause()
		s.later(d, sprintf("resume node %d", i), n.resume)
	case 1:
		s.kill(rng, i)
	case 2:
		f := linkFaults{
			delay:     between(rng, 0, 60*time.Millisecond),
			drop:      rng.Float64() * 0.05,
			loseReply: rng.Float64() * 0.05,
			losePush:  rng.Float64() * 0.3,
		}
		d := between(rng, 50*time.Millisecond, 2*time.Second)
		s.log.add("node %d's links for %v: %+v", i, d, f)
		n.setFaults(f)
		s.later(d, sprintf("node %d's links healed", i), func() { n.setFaults(linkFaults{}) })
	case 3:
		c := rng.IntN(s.cfg.Clients)
		d := between(rng, 50*time.Millisecond, 2*time.Second)
		s.log.add("cut client %d off node %d for %v", c, i, d)
		s.partition(c, i, true)
		s.later(d, sprintf("join client %d and node %d", c, i), func() { s.partition(c, i, false) })
	case 4:
		if n.clockOff() {
			return
		}
		// Steps beyond the clock guard's tolerance (1 s), kept for longer
		// than any TTL: ALGORITHM.md says what the guard cannot see.
		off := between(rng, 1500*time.Millisecond, 4*time.Second)
		if rng.IntN(2) == 0 {
			off = -off
		}
		d := between(rng, 2*ttl+time.Second, 2*ttl+3*time.Second)
		s.log.add("node %d's clock steps by %v for %v", i, off, d)
		n.setClock(off)
		s.later(d, sprintf("node %d's clock steps back", i), func() { n.setClock(0) })
	case 5:
		s.pauseClient(rng)
	case 6:
		s.restartEarly(i)
	}
}

// restartEarly kills node i and restarts it empty before the longest TTL
// has passed, against the operators' rule: locks it held are lost within
// their validity, and another client may hold one beside its holder, which
// the model does not exclude (ALGORITHM.md, "Restarts without
// persistence") but which every verdict must still tell truly (see
// history.early). At most earlyRestarts a run, drawn from a stream of their
// own, so that the other faults of a seed stay where they were.
func (s *Sim) restartEarly(i int) {
	n := s.nodes[i]
	if s.early >= earlyRestarts || n.server() == nil {
		return
	}
	s.early++
	d := between(s.earlyRng, 10*time.Millisecond, s.cfg.TTL-time.Millisecond)
	s.log.add("kill node %d for %v (restart empty, early)", i, d)
	n.kill()
	s.later(d, sprintf("restart node %d", i), func() { n.restart(false, true) })
}

// earlyRestarts bounds the early restarts of a run: each one can let two
// holders in, and a run with them checks verdicts rather than exclusion.
const earlyRestarts = 2

// kill kills node i, to restart it with its keys, or empty after more than
// a TTL.
func (s *Sim) kill(rng *rand.Rand, i int) {
	n, ttl := s.nodes[i], s.cfg.TTL
	if n.server() == nil {
		return
	}
	keep := rng.Float64() < 0.6
	d := between(rng, 10*time.Millisecond, 2*time.Second)
	if !keep { // down longer than any lock it held could live
		d = between(rng, ttl+200*time.Millisecond, 2*ttl+time.Second)
	}
	s.log.add("kill node %d for %v (restart %s)", i, d, map[bool]string{true: "with its keys", false: "empty"}[keep])
	n.kill()
	s.later(d, sprintf("restart node %d", i), func() { n.restart(keep, false) })
}

// pauseClient pauses a client's whole process (a stop-the-world pause, a
// stalled VM), most often past its TTL: its leases end on the nodes while
// it sleeps. Half of the pauses start right after the process sends a
// request, whose reply then waits for the pause's end.
func (s *Sim) pauseClient(rng *rand.Rand) {
	ttl := s.cfg.TTL
	c := rng.IntN(s.cfg.Clients)
	d := between(rng, ttl/2, 2*ttl)
	if rng.IntN(2) == 0 {
		s.log.add("client %d's process to pause for %v after its next request", c, d)
		s.pauseAfterSend(c, d)
		return
	}
	if !s.freeze(c) {
		return
	}
	s.log.add("pause client %d's process for %v", c, d)
	s.later(d, sprintf("resume client %d's process", c), func() { s.thaw(c) })
}
