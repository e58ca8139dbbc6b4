package redlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Node identities. Each node must be its own Redis master (or cluster):
// a quorum counted on two clients of the same servers would count those
// servers twice, and one of them could grant a quorum on its own. New does
// no I/O, so it catches only a client given twice and two clients with the
// same address; two cluster clients seeded with different members, or two
// Sentinel-managed clients of one master, look different there.
//
// So the first acquisition of a Redlock asks every node who it is: INFO's
// run_id, unique to a server process, of each server behind the node. It
// waits for the answers up to its node timeout (one round trip on a
// healthy deployment, once per Redlock); nodes that have not answered by
// then are asked again in the background, at growing intervals, and
// again whenever a node comes back after being down. Two nodes that share
// a server make every later acquisition fail with an error wrapping
// ErrInvalidArgument: a deployment error, which no retry can change. A
// node whose user may not run INFO cannot tell, and is taken as distinct.
type identities struct {
	once    sync.Once
	done    chan struct{} // closed once the first round of answers is in
	settled atomic.Bool   // an acquisition waited already: later ones do not

	mu  sync.Mutex
	ids [][]string // per node, nil until it answered
	err error      // two nodes share a server
}

// identifyMax bounds the interval between two tries to identify the
// nodes that have not answered.
const identifyMax = 30 * time.Second

// identified starts identifying the nodes on the first call, waits for the
// first answers at most wait, and returns the error of nodes found to share
// a server. The caller is counted in the Redlock's WaitGroup.
func (r *Redlock) identified(wait time.Duration) error {
	id := &r.ident
	id.once.Do(func() {
		id.mu.Lock()
		id.done = make(chan struct{})
		id.ids = make([][]string, len(r.peers))
		id.mu.Unlock()
		r.wg.Go(r.identify)
	})
	if !id.settled.Load() {
		timer := time.NewTimer(wait)
		select {
		case <-id.done:
		case <-timer.C:
		case <-r.done:
		}
		timer.Stop()
		id.settled.Store(true)
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.err
}

// identify asks every node who it is until each has answered, the Redlock
// closes, or two nodes are found to share a server.
func (r *Redlock) identify() {
	first := true
	wait := time.Second
	for {
		left := r.identifyRound(nil)
		if first {
			close(r.ident.done)
			first = false
		}
		if left == 0 || !r.sleep(wait) {
			return
		}
		wait = min(2*wait, identifyMax)
	}
}

// reidentify asks node i again who it is, in the background: it came back
// after being down, and may be another server now (a Sentinel failover).
// Called from a goroutine counted in the Redlock's WaitGroup.
func (r *Redlock) reidentify(i int) {
	r.ident.mu.Lock()
	started := r.ident.ids != nil
	r.ident.mu.Unlock()
	if !started || r.track(1) != nil {
		return
	}
	go func() {
		defer r.wg.Done()
		r.identifyRound([]int{i})
	}()
}

// identifyRound asks the given nodes (nil: those not identified yet) who
// they are, records the answers and checks them; it returns how many nodes
// are still unknown and worth asking again.
func (r *Redlock) identifyRound(only []int) int {
	id := &r.ident
	id.mu.Lock()
	if id.err != nil {
		id.mu.Unlock()
		return 0
	}
	if only == nil {
		for i, ids := range id.ids {
			if ids == nil {
				only = append(only, i)
			}
		}
	}
	id.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	go func() { // Close cuts the round short
		select {
		case <-r.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	type answer struct {
		i   int
		ids []string
		err error
	}
	answers := make(chan answer, len(only))
	for _, i := range only {
		go func() {
			ids, err := r.peers[i].n.identify(ctx)
			answers <- answer{i, ids, err}
		}()
	}
	left := 0
	id.mu.Lock()
	defer id.mu.Unlock()
	for range only {
		id.mu.Unlock()
		a := <-answers
		id.mu.Lock()
		switch {
		case a.err == nil:
			id.ids[a.i] = a.ids
		case unreachable(a.err) || clientErr(a.err) != a.err: //nolint:errorlint // clientErr wraps when it changes anything
			left++
		default:
			id.ids[a.i] = []string{} // an error reply (INFO not allowed): cannot tell
		}
	}
	id.err = r.sameServers(id.ids)
	if id.err != nil {
		return 0
	}
	return left
}

// sameServers returns an error naming two nodes that share a server, nil
// when there are none among those identified.
func (r *Redlock) sameServers(ids [][]string) error {
	owner := map[string]int{}
	for i, list := range ids {
		for _, s := range list {
			if j, dup := owner[s]; dup && j != i {
				return invalid("nodes %d (%s) and %d (%s) are clients of the same Redis server (run_id %s): "+
					"each node must be an independent master, or an independent cluster", j, r.peers[j].n.addr(), i, r.peers[i].n.addr(), s)
			}
			owner[s] = i
		}
	}
	return nil
}
