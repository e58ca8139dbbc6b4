package redlock

import (
	"context"
	"slices"
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
// So the first acquisition of a Redlock asks every node who it is, at the
// same time as it asks for the lock: INFO's run_id, unique to a server
// process, of each server behind the node. Once a quorum granted, it waits
// for the answers until a quorum of nodes has answered and then as long
// again for the others (a silent or far minority must not cost it a node
// timeout), and at most until its node timeout; the nodes that granted
// answered the lock's request, so their INFO comes about as fast. Nodes that have not answered
// are asked again in the background, at growing intervals, and any node
// again whenever it comes back after being down. Two nodes that share a
// server make every later acquisition fail with an error wrapping
// ErrInvalidArgument: a deployment error, which no retry can change. A
// node whose user may not run INFO cannot tell, and is taken as distinct.
// Nodes too slow for the first acquisition's wait could still count twice
// in it: two clients of one server are seldom that different in speed.
//
// The identities also vouch for releases that find their key gone (see
// Redlock.release): the run id of the server that answered must be one
// the node was asked for before the lease began. Run ids are never
// reused, so that server ran from its answer to the release; the first
// acquisition asks at its start, which leaves one window: a restart
// between the execution of the lock's SET and that of INFO, within the
// first acquisition's round trip, is not seen.
type identities struct {
	once    sync.Once
	done    chan struct{} // closed once the first round of answers is in
	enough  chan struct{} // closed once a quorum of nodes has answered
	settled atomic.Bool   // an acquisition waited already: later ones do not

	mu    sync.Mutex
	ids   [][]string  // per node, nil until it answered
	since []time.Time // per node, when the question that learned ids was sent
	known int         // nodes that answered
	err   error       // two nodes share a server
}

// identifyMax bounds the interval between two tries to identify the
// nodes that have not answered.
const identifyMax = 30 * time.Second

// startIdentify starts identifying the nodes, once, and returns the error
// of nodes already found to share a server. The caller is counted in the
// Redlock's WaitGroup.
func (r *Redlock) startIdentify() error {
	id := &r.ident
	id.once.Do(func() {
		id.mu.Lock()
		id.done, id.enough = make(chan struct{}), make(chan struct{})
		id.ids, id.since = make([][]string, len(r.peers)), make([]time.Time, len(r.peers))
		id.mu.Unlock()
		sent := r.now() // before the acquisition that starts it
		r.wg.Go(func() { r.identify(sent) })
	})
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.err
}

// identified waits, the first time only, for the nodes' identities: until
// all have answered, or a quorum has and then as long again as that took
// since start, and at most until deadline. It returns the error of nodes
// found to share a server.
func (r *Redlock) identified(start, deadline time.Time) error {
	id := &r.ident
	if !id.settled.Load() {
		timer := time.NewTimer(deadline.Sub(r.now()))
		select {
		case <-id.done:
		case <-id.enough:
			// A quorum answered: give the others as long again.
			grace := time.NewTimer(max(r.now().Sub(start), 100*time.Microsecond))
			select {
			case <-id.done:
			case <-grace.C:
			case <-timer.C:
			case <-r.done:
			}
			grace.Stop()
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

// sameServer reports whether server, a run id that node i answered with,
// is one of the node's servers as known since t or earlier.
func (r *Redlock) sameServer(i int, server string, t time.Time) bool {
	id := &r.ident
	id.mu.Lock()
	defer id.mu.Unlock()
	if server == "" || id.ids == nil || id.ids[i] == nil || id.since[i].After(t) {
		return false
	}
	return slices.Contains(id.ids[i], server)
}

// identify asks every node who it is until each has answered, the Redlock
// closes, or two nodes are found to share a server.
func (r *Redlock) identify(sent time.Time) {
	first := true
	wait := time.Second
	for {
		left := r.identifyRound(nil, sent)
		if first {
			close(r.ident.done)
			first = false
		}
		if left == 0 || !r.sleep(wait) {
			return
		}
		wait = min(2*wait, identifyMax)
		sent = r.now()
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
		r.identifyRound([]int{i}, r.now())
	}()
}

// identifyRound asks the given nodes (nil: those not identified yet) who
// they are, records the answers as learned at sent and checks them; it
// returns how many nodes are still unknown and worth asking again.
func (r *Redlock) identifyRound(only []int, sent time.Time) int {
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
		fresh := id.ids[a.i] == nil
		switch {
		case a.err == nil:
			if !slices.Equal(id.ids[a.i], a.ids) {
				id.ids[a.i], id.since[a.i] = a.ids, sent
			}
		case unreachable(a.err) || clientErr(a.err) != a.err: //nolint:errorlint // clientErr wraps when it changes anything
			left++
		default:
			id.ids[a.i] = []string{} // an error reply (INFO not allowed): cannot tell
		}
		if fresh && id.ids[a.i] != nil {
			id.known++
			if id.known == quorum(len(r.peers)) {
				close(id.enough)
			}
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
