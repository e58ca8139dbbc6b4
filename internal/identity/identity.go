// Package identity knows which server each node is: the run ids (INFO
// run_id, unique to a server process) of the servers behind each node, as
// learned and when. It finds two nodes that are the same servers, and
// tells a release that found its key gone on the server it was taken on
// from one that reached another server (a restart, a failover). It does no
// I/O and starts no goroutine: the layer above asks the nodes and records
// their answers here.
package identity

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Registry is what is known of the nodes' identities. It is safe for
// concurrent use.
type Registry struct {
	settled chan struct{} // closed by Settle's first call

	mu    sync.Mutex
	begun bool
	isSet bool
	ids   [][]string  // per node, nil until it answered
	since []time.Time // per node, when the question that learned ids was sent
	err   error       // two nodes share a server
}

// New returns a registry for n nodes.
func New(n int) *Registry {
	return &Registry{
		settled: make(chan struct{}),
		ids:     make([][]string, n), since: make([]time.Time, n),
	}
}

// Begin reports whether this is the first call: the caller is then the
// one that asks every node first.
func (r *Registry) Begin() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.begun {
		return false
	}
	r.begun = true
	return true
}

// Err returns the error of nodes found to share a server, nil while none
// are.
func (r *Registry) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Settle records that the first wait for identities is over: later
// acquisitions do not wait.
func (r *Registry) Settle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isSet {
		r.isSet = true
		close(r.settled)
	}
}

// Settled is closed once the first wait for identities is over.
func (r *Registry) Settled() <-chan struct{} { return r.settled }

// Missing returns the nodes that have not answered yet.
func (r *Registry) Missing() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for i, ids := range r.ids {
		if ids == nil {
			out = append(out, i)
		}
	}
	return out
}

// Answer is what one node said when asked who it is.
type Answer struct {
	IDs []string
	// Unknown is set when the node could not say (INFO refused): it is
	// taken as distinct from every other, and not asked again.
	Unknown bool
}

// Record records node i's answer to a question sent at sent, and checks
// the nodes against each other; names names nodes in the error.
func (r *Registry) Record(i int, a Answer, sent time.Time, names func(int) string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case a.Unknown:
		if r.ids[i] == nil {
			r.ids[i] = []string{}
		}
	case !slices.Equal(r.ids[i], a.IDs):
		r.ids[i], r.since[i] = a.IDs, sent
	}
	if r.err == nil {
		r.err = r.sameServers(names)
	}
}

// Same reports whether server, a run id that node i answered with, is one
// of the node's servers as known since t or earlier.
func (r *Registry) Same(i int, server string, t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if server == "" || r.ids[i] == nil || r.since[i].After(t) {
		return false
	}
	return slices.Contains(r.ids[i], server)
}

// sameServers returns an error naming two nodes that share a server, nil
// when there are none among those identified. Called with r.mu held.
func (r *Registry) sameServers(names func(int) string) error {
	owner := map[string]int{}
	for i, list := range r.ids {
		for _, s := range list {
			if j, dup := owner[s]; dup && j != i {
				return fmt.Errorf("nodes %d (%s) and %d (%s) are clients of the same Redis server (run_id %s): "+
					"each node must be an independent master, or an independent cluster", j, names(j), i, names(i), s)
			}
			owner[s] = i
		}
	}
	return nil
}
