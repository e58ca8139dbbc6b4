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
	waiting []func() // started, in order, once busy is 0
}

func newGates(n int) []*gate {
	gs := make([]*gate, n)
	for i := range gs {
		gs[i] = new(gate)
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
		f := g.waiting[0]
		g.waiting = g.waiting[1:]
		g.mu.Unlock()
		f() // may enter
		g.mu.Lock()
	}
	g.mu.Unlock()
}

// then runs f now if no request is in flight, else once none is.
func (g *gate) then(f func()) {
	g.mu.Lock()
	if g.busy > 0 || len(g.waiting) > 0 {
		g.waiting = append(g.waiting, f)
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	f()
}

// order keeps, per lock name, one gate per node that this process's
// releases of the name enter while they are in flight (see pool.releasing).
type order struct {
	n     int // nodes
	mu    sync.Mutex
	names map[string]*nameOrder
}

// nameOrder is one name's gates, one per node, and how many releases are
// in them.
type nameOrder struct {
	gates []*gate
	refs  int
}

// enter enters a release of name on node i, and returns the function that
// takes it out.
func (o *order) enter(name string, i int) (leave func()) {
	o.mu.Lock()
	no := o.names[name]
	if no == nil {
		no = &nameOrder{gates: newGates(o.n)}
		o.names[name] = no
	}
	no.refs++
	g := no.gates[i]
	o.mu.Unlock()
	g.enter()
	return func() {
		g.leave()
		o.mu.Lock()
		if no.refs--; no.refs == 0 {
			delete(o.names, name)
		}
		o.mu.Unlock()
	}
}

// after runs f once the releases of name in flight on node i have
// returned: at once when there are none.
func (o *order) after(name string, i int, f func()) {
	o.mu.Lock()
	no := o.names[name]
	o.mu.Unlock()
	if no == nil {
		f()
		return
	}
	no.gates[i].then(f)
}
