package sim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// A node is one simulated Redis master: a miniredis server, which runs the
// library's own scripts, reached only through links that the simulator
// can slow, break or hold.
type node struct {
	sim *Sim
	idx int

	mu     sync.Mutex
	m      *miniredis.Miniredis
	down   bool          // killed: links closed, dials refused
	paused chan struct{} // non-nil while paused; closed on resume
	links  map[*link]struct{}
	offset time.Duration // how far the node's clock is from true time
	faults linkFaults    // per-frame faults in force on this node's links
	// clusterLike makes the node's pub/sub behave as a Redis Cluster's: a
	// channel that hashes to another master is published there (over the
	// bus, after the script), and this master's PUBLISH and PUBSUB NUMSUB
	// count none of its subscribers.
	clusterLike bool
	bus         chan [2]string
	clockSet    time.Time // the clock's last setting, while it is off
	// runs counts the node's server processes: each start (a restart
	// included, with its keys or without) has a run id of its own, which
	// INFO server answers as a real server's run_id. Atomic: the hook
	// reads it while miniredis holds its lock, which restart takes under
	// n.mu.
	runs atomic.Int64
}

// linkFaults are the probabilities, per frame, of each fault a link can
// inflict, and the latency it adds.
type linkFaults struct {
	delay     time.Duration // upper bound of a random extra latency
	drop      float64       // the connection breaks before the request reaches the node
	loseReply float64       // the request is applied, its reply lost with the connection
	losePush  float64       // a pub/sub message the node counted is lost on the way
}

func newNode(s *Sim, idx int) *node {
	n := &node{sim: s, idx: idx, links: map[*link]struct{}{}, bus: make(chan [2]string, 1024)}
	n.m = n.newServer()
	return n
}

// newServer returns an empty miniredis whose keys expire by the node's
// clock, with the hook that makes it cluster-like when asked.
func (n *node) newServer() *miniredis.Miniredis {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	c, err := m.Dial() // starts its server without a listener
	if err != nil {
		panic(err)
	}
	_ = c.Close()
	m.Server().SetPreHook(n.hook)
	return m
}

// elsewhere reports whether, on a cluster-like node, channel ch hashes to
// another master than the one that runs the node's scripts.
func (n *node) elsewhere(ch string) bool {
	if !n.clusterLike {
		return false
	}
	h := fnv.New64a()
	h.Write([]byte(ch))
	return (h.Sum64()^n.sim.seed)%3 != 0
}

// hook runs before every command the server runs, scripts' included.
func (n *node) hook(c *server.Peer, cmd string, args ...string) bool {
	switch {
	case cmd == "PUBLISH" && len(args) == 2 && n.elsewhere(args[0]):
		n.publishElsewhere(c, args[0], args[1])
		return true
	case cmd == "INFO" && len(args) == 1 && strings.EqualFold(args[0], "server"):
		// miniredis has no run_id; the library tells a restarted server
		// from the one it acquired on by it (a release's "gone").
		c.WriteBulk("# Server\r\nrun_id:" + n.runID() + "\r\n")
		return true
	case cmd == "PUBSUB" && len(args) >= 2 && strings.EqualFold(args[0], "NUMSUB"):
		return n.numsubElsewhere(c, args[1:])
	}
	return false
}

// publishElsewhere sends a message published to a channel of another
// master over the bus, and answers that no subscriber of this one got it.
func (n *node) publishElsewhere(c *server.Peer, ch, msg string) {
	select {
	case n.bus <- [2]string{ch, msg}:
	default: // the bus is full: the message is lost, as any may be
	}
	c.WriteInt(0)
}

// numsubElsewhere answers PUBSUB NUMSUB for chans when every one hashes
// to another master (none of this one's subscribers count), and reports
// whether it did; otherwise miniredis answers.
func (n *node) numsubElsewhere(c *server.Peer, chans []string) bool {
	for _, ch := range chans {
		if !n.elsewhere(ch) {
			return false
		}
	}
	c.WriteLen(2 * len(chans))
	for _, ch := range chans {
		c.WriteBulk(ch)
		c.WriteInt(0)
	}
	return true
}

// runID is the run id of the node's current server process: 40 hex
// digits drawn from the seed, the node and its run.
func (n *node) runID() string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d %d %d", n.sim.seed, n.idx, n.runs.Load())
	return fmt.Sprintf("%040x", h.Sum64())
}

// runBus delivers what cluster-like scripts published to channels of other
// masters, after the script, as a cluster bus does; it ends when done closes.
func (n *node) runBus(done <-chan struct{}, rng *rand.Rand) {
	for {
		select {
		case <-done:
			return
		case msg := <-n.bus:
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
			n.mu.Lock()
			m, down := n.m, n.down
			n.mu.Unlock()
			if !down {
				m.Publish(msg[0], msg[1])
			}
		}
	}
}

// server returns the node's server, or nil when it is down.
func (n *node) server() *miniredis.Miniredis {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		return nil
	}
	return n.m
}

// kill closes every link of the node and refuses new ones.
func (n *node) kill() {
	n.mu.Lock()
	n.down = true
	links := n.takeLinks()
	n.mu.Unlock()
	n.sim.breakApart(links)
}

// restart brings a killed node back, with its keys or without them; early
// says it comes back empty sooner than the operators' rule allows (see
// history.early).
func (n *node) restart(keepKeys, early bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.runs.Add(1)
	n.sim.hist.faulted(n.idx)
	if !keepKeys {
		n.sim.hist.wiped(early)
		old := n.m
		n.m = n.newServer()
		old.Close()
		if n.offset != 0 {
			n.clockSet = time.Now().Add(n.offset)
			n.m.SetTime(n.clockSet)
		}
	}
	n.down = false
}

// pause holds every frame to or from the node until resume.
func (n *node) pause() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.paused == nil {
		n.paused = make(chan struct{})
	}
}

func (n *node) resume() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.paused != nil {
		close(n.paused)
		n.paused = nil
	}
}

// setClock moves the node's clock to true time + offset.
func (n *node) setClock(offset time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.offset = offset
	n.sim.hist.faulted(n.idx)
	n.sim.hist.stepped()
	if offset == 0 {
		n.m.SetTime(time.Time{})
		return
	}
	n.clockSet = time.Now().Add(offset)
	n.m.SetTime(n.clockSet)
}

// tickClock keeps a node whose clock is off running at the true rate.
func (n *node) tickClock() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.offset != 0 {
		n.clockSet = time.Now().Add(n.offset)
		n.m.SetTime(n.clockSet)
	}
}

func (n *node) setFaults(f linkFaults) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults = f
}

func (n *node) takeLinks() []*link {
	out := make([]*link, 0, len(n.links))
	for l := range n.links {
		out = append(out, l)
	}
	clear(n.links)
	return out
}

// close shuts the node down at the end of a run.
func (n *node) close() {
	n.mu.Lock()
	n.down = true
	links := n.takeLinks()
	if n.paused != nil {
		close(n.paused)
		n.paused = nil
	}
	m := n.m
	n.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	m.Close()
}

func (n *node) isPaused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused != nil
}

func (n *node) clockOff() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.offset != 0
}
