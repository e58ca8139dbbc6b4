package redlock

import "sync"

// gate orders one node's requests. Requests that must land first enter it;
// requests that must come after them go through then, which starts them
// only once every request that entered before has returned. A lease's
// acquire requests enter its gate, so that a release sent on another
// connection while a SET is still in flight cannot reach the node first,
// find nothing, and leave the late SET's key behind until its TTL. A
// name's releases enter the pool's gate for that name (see pool.order), so
// that this process's next acquisition of the name cannot overtake them.
// A gate starts requests from the completion of the last one, on the
// node's own goroutine: waiting costs no goroutine.
type gate struct {
	mu      sync.Mutex
	busy    int      // requests in flight that others wait for
	waiting []runner // started, in order, once busy is 0
}

// runner is a request waiting at a gate: run starts it, or moves it on to
// its next gate.
type runner interface{ run() }

// newGates returns n gates, one per node, in one allocation.
func newGates(n int) []*gate {
	backing := make([]gate, n)
	gs := make([]*gate, n)
	for i := range gs {
		gs[i] = &backing[i]
	}
	return gs
}

// enter counts one more request in flight.
func (g *gate) enter() {
	g.mu.Lock()
	g.busy++
	g.mu.Unlock()
}

// leave counts one request done, and starts what waited for it.
func (g *gate) leave() {
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
func (g *gate) then(r runner) {
	if g.wait(r) {
		return
	}
	r.run()
}

// wait queues r and reports true when requests are in flight; false when
// none is, and r may run now.
func (g *gate) wait(r runner) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy > 0 || len(g.waiting) > 0 {
		g.waiting = append(g.waiting, r)
		return true
	}
	return false
}

// order keeps, per Mutex (by its order number, see Mutex.order), one gate
// per node that the Mutex's releases enter while they are in flight (see
// pool.releasing).
type order struct {
	n     int // nodes
	mu    sync.Mutex
	names map[uint64]*nameOrder
}

// nameOrder is one Mutex's gates, one per node, and how many releases are
// in them.
type nameOrder struct {
	gates []gate
	refs  int
}

// ticket is one release's place in its Mutex's gate on one node.
type ticket struct {
	name uint64
	no   *nameOrder
	g    *gate
}

// enter enters a release of name on node i, and returns its ticket, to
// hand back to leave once it returned.
func (o *order) enter(name uint64, i int) ticket {
	o.mu.Lock()
	no := o.names[name]
	if no == nil {
		no = &nameOrder{gates: make([]gate, o.n)}
		o.names[name] = no
	}
	no.refs++
	g := &no.gates[i]
	o.mu.Unlock()
	g.enter()
	return ticket{name: name, no: no, g: g}
}

// leave takes a release out of its gate, starting what waited for it.
func (o *order) leave(t ticket) {
	t.g.leave()
	o.mu.Lock()
	if t.no.refs--; t.no.refs == 0 {
		delete(o.names, t.name)
	}
	o.mu.Unlock()
}

// wait queues r behind the releases of name in flight on node i, and
// reports true; false when there are none, and r may run now.
func (o *order) wait(name uint64, i int, r runner) bool {
	o.mu.Lock()
	no := o.names[name]
	o.mu.Unlock()
	return no != nil && no.gates[i].wait(r)
}
