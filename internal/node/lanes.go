package node

import "sync"

// lanes is the queue of one node's calls, kept in Lanes lanes. A lock name
// always takes the same lane, and a lane's calls are sent in the order
// they were queued, each batch of a lane only once its previous batch
// returned: so a node applies a name's operations in the order Do was
// called for them (see Laned), while a worker stuck on one lane's round
// trip (a silent node, a lost reply) holds back only that lane's names.
// A worker takes the calls of every idle lane at once, up to MaxBatch, so
// that names share round trips as before.
type lanes struct {
	mu      sync.Mutex
	ready   sync.Cond // signalled when calls are queued or a lane turns idle
	queued  [Lanes][]*call
	busy    [Lanes]bool // a batch with calls of the lane is in flight
	n       int         // calls queued in all lanes
	next    int         // the lane a worker looks at first: turns rotate
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
// calls of every idle lane, up to MaxBatch, marks those lanes busy and
// appends them to taken. It returns false once stopped.
func (ls *lanes) take(batch []*call, taken []int) ([]*call, []int, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for {
		if ls.stopped {
			return batch, taken, false
		}
		for k := 0; k < Lanes && len(batch) < MaxBatch; k++ {
			i := (ls.next + k) % Lanes
			q := ls.queued[i]
			if ls.busy[i] || len(q) == 0 {
				continue
			}
			m := min(len(q), MaxBatch-len(batch))
			batch = append(batch, q[:m]...)
			ls.queued[i] = append(q[:0], q[m:]...)
			ls.busy[i] = true
			taken = append(taken, i)
		}
		if len(batch) > 0 {
			ls.n -= len(batch)
			ls.next = (ls.next + 1) % Lanes
			return batch, taken, true
		}
		ls.ready.Wait()
	}
}

// done marks the lanes of a batch that returned idle again.
func (ls *lanes) done(taken []int) {
	ls.mu.Lock()
	for _, i := range taken {
		ls.busy[i] = false
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
