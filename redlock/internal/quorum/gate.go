package quorum

import "sync"

// Gate holds one node's requests back until the requests that entered it
// have returned. Requests that must answer first enter it; requests that
// depend on their answers go through then, which starts them only once
// every request that entered before has returned. An attempt's acquire
// requests enter its gate: a re-ask waits for the node's earlier answer,
// and the undo of a failed attempt is sent to a node, or not, once the
// node said whether it may hold the token (see mustUndo). The order in
// which a node applies a name's requests is the transport's (one lane per
// name, see node.Laned), not the gates'. A gate starts requests from the
// completion of the last one, on the node's own goroutine: waiting costs
// no goroutine.
type Gate struct {
	mu      sync.Mutex
	busy    int      // requests in flight that others wait for
	waiting []runner // started, in order, once busy is 0
}

// runner is a request waiting at a gate: run starts it, or moves it on to
// its next gate.
type runner interface{ run() }

// NewGates returns n gates, one per node, in one allocation.
func NewGates(n int) []*Gate {
	backing := make([]Gate, n)
	gs := make([]*Gate, n)
	for i := range gs {
		gs[i] = &backing[i]
	}
	return gs
}

// enter counts one more request in flight.
func (g *Gate) enter() {
	g.mu.Lock()
	g.busy++
	g.mu.Unlock()
}

// leave counts one request done, and starts what waited for it.
func (g *Gate) leave() {
	g.mu.Lock()
	g.busy--
	for g.busy == 0 && len(g.waiting) > 0 {
		r := g.waiting[0]
		g.waiting = g.waiting[1:]
		g.mu.Unlock()
		r.run() // may enter
		g.mu.Lock()
	}
	g.mu.Unlock()
}

// then runs r now if no request is in flight, else once none is.
func (g *Gate) then(r runner) {
	if g.wait(r) {
		return
	}
	r.run()
}

// wait queues r and reports true when requests are in flight; false when
// none is, and r may run now.
func (g *Gate) wait(r runner) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy > 0 || len(g.waiting) > 0 {
		g.waiting = append(g.waiting, r)
		return true
	}
	return false
}
