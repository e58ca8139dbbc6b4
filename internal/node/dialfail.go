package node

import "time"

// Dial failures: a transport that watches its client's dials (see
// goredis/dial.go) keeps the last that failed, which a node timeout names.

// DialFailure is a client's last dial that failed.
type DialFailure struct {
	Err error
	At  time.Time
}

// DialWatcher is a Node whose client's dials are watched.
type DialWatcher interface {
	// LastDialFailure returns the client's last dial when it failed; nil
	// when it succeeded, or no dial failed yet. For a Cluster or a Ring,
	// whose shards dial on their own, it is the latest failure among the
	// shards whose last dial failed.
	LastDialFailure() *DialFailure
}

// LastDialFailure implements DialWatcher: the transport's.
func (n *Redis) LastDialFailure() *DialFailure {
	if w := n.watched(); w != nil {
		return w.LastDialFailure()
	}
	return nil
}
