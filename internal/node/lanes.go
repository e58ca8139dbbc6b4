package node

import "sync"

// lanes is the queue of one node's calls, kept in Lanes lanes. A lock name
// always takes the same lane, and a lane's calls are sent in the order
// they were queued, each batch of a lane only once its previous batch
// returned: so a node applies a name's operations in the order Do was
// called for them (see Laned), while a worker stuck on one lane's round
// trip (a silent node, a lost reply) holds back only that lane's names.
// A worker takes the calls of every idle lane at once, up to MaxBatch, so
// that names share round trips as before. Calls that commute (see
// Concurrent) at the head of a lane whose batches in flight hold only such
// calls go too: the readers of one name use every worker, not one.
type lanes struct {
	mu     sync.Mutex
	ready  sync.Cond // signalled when calls are queued or a lane turns idle
	queued [Lanes][]*call
	busy   [Lanes]int  // batches with calls of the lane in flight
	excl   [Lanes]bool // one of them holds a call that is not Concurrent
	// flying counts, per lane, the Concurrent calls in flight by the
	// token whose own order they keep: one holder's calls never pass one
	// another.
	flying  [Lanes]map[string]int
	n       int // calls queued in all lanes
	next    int // the lane a worker looks at first: turns rotate
	stopped bool
}

// Lanes is the number of lanes of a node: a stuck round trip holds back
// one name in Lanes.
const Lanes = 16

func (ls *lanes) init() { ls.ready.L = &ls.mu }

// put queues c in lane i; it returns ErrQueueFull when QueueLen calls are
// queued already, ErrClosed once stopped.
func (ls *lanes) put(i int, c *call) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	switch {
	case ls.stopped:
		return ErrClosed
	case ls.n >= QueueLen:
		return ErrQueueFull
	}
	ls.queued[i] = append(ls.queued[i], c)
	ls.n++
	ls.ready.Signal()
	return nil
}

// take waits until some idle lane has calls, then appends to batch the
// calls of every idle lane, up to MaxBatch (and those that may pass the
// batches in flight, see leaving), marks those lanes busy and appends them
// to taken, and the tokens of the Concurrent calls taken to toks (for
// done). It returns false once stopped.
func (ls *lanes) take(batch []*call, taken []int, toks []laneToken) ([]*call, []int, []laneToken, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for {
		if ls.stopped {
			return batch, taken, toks, false
		}
		for k := 0; k < Lanes && len(batch) < MaxBatch; k++ {
			i := (ls.next + k) % Lanes
			q := ls.queued[i]
			m, excl := ls.leaving(i, MaxBatch-len(batch))
			if m == 0 {
				continue
			}
			for _, c := range q[:m] {
				if tok, ok := concurrent(c.op); ok {
					if ls.flying[i] == nil {
						ls.flying[i] = map[string]int{}
					}
					ls.flying[i][tok]++
					toks = append(toks, laneToken{i, tok})
				}
			}
			batch = append(batch, q[:m]...)
			ls.queued[i] = append(q[:0], q[m:]...)
			ls.busy[i]++
			ls.excl[i] = ls.excl[i] || excl
			taken = append(taken, i)
		}
		if len(batch) > 0 {
			ls.n -= len(batch)
			ls.next = (ls.next + 1) % Lanes
			return batch, taken, toks, true
		}
		ls.ready.Wait()
	}
}

// laneToken is a Concurrent call in flight: its lane and its token.
type laneToken struct {
	lane  int
	token string
}

// leaving returns how many of lane i's queued calls may leave now, at most
// room, and whether one of them is not Concurrent: all of them (up to
// room) when the lane is idle; while only Concurrent calls are in flight,
// the Concurrent ones at its head, up to the first whose token has a call
// in flight; otherwise none.
func (ls *lanes) leaving(i, room int) (int, bool) {
	q := ls.queued[i]
	m := min(len(q), room)
	if ls.busy[i] == 0 {
		excl := false
		for _, c := range q[:m] {
			_, ok := concurrent(c.op)
			excl = excl || !ok
		}
		return m, excl
	}
	if ls.excl[i] {
		return 0, false
	}
	k := 0
	for ; k < m; k++ {
		tok, ok := concurrent(q[k].op)
		if !ok || ls.flying[i][tok] > 0 {
			break
		}
	}
	return k, false
}

// done marks the lanes of a batch that returned: idle again once none of
// their batches is in flight; toks are its Concurrent calls.
func (ls *lanes) done(taken []int, toks []laneToken) {
	ls.mu.Lock()
	for _, t := range toks {
		if ls.flying[t.lane][t.token]--; ls.flying[t.lane][t.token] == 0 {
			delete(ls.flying[t.lane], t.token)
		}
	}
	for _, i := range taken {
		ls.busy[i]--
		if ls.busy[i] == 0 {
			ls.excl[i] = false
		}
	}
	ls.mu.Unlock()
	ls.ready.Broadcast()
}

// stop makes take return false and put refuse, and returns the calls still
// queued, for the caller to answer.
func (ls *lanes) stop() []*call {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.stopped = true
	var left []*call
	for i := range ls.queued {
		left = append(left, ls.queued[i]...)
		ls.queued[i] = nil
	}
	ls.n = 0
	ls.ready.Broadcast()
	return left
}

// laneOf returns the lane of op: its lock name's (FNV-1a), or for an
// operation of no name the lane spread says.
func laneOf(op Op, spread uint32) int {
	name := LaneOf(op)
	if name == "" {
		return int(spread % Lanes)
	}
	h := uint32(2166136261)
	for i := range len(name) {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return int(h % Lanes)
}
