package sim

import (
	"bufio"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// A link is one client connection to a node: a pipe to the client, a pipe
// to the node's server, and two goroutines that pass whole frames across,
// inflicting the node's faults in force on the way.
type link struct {
	node   *node
	client int
	dial   int           // how many links the client dialled to the node before
	cli    net.Conn      // the simulator's end of the client's pipe
	srv    net.Conn      // a connection to the node's server
	wan    time.Duration // the one-way delay between their sites (see sites.go)

	first uint64 // its first request past the handshake, see Sim.decisions

	mu           sync.Mutex
	closed       bool
	done         chan struct{}
	subscriber   bool         // the client subscribed on it: pushes come down it
	setupReplies int          // replies to set-up requests still to pass, see handshake
	pending      []*rand.Rand // the decisions of the replies to come, in order
	queue        []stamped    // frames from the server not passed on yet
	more         chan struct{}
}

func (l *link) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()
	_ = l.cli.Close()
	_ = l.srv.Close()
	l.node.mu.Lock()
	delete(l.node.links, l)
	l.node.mu.Unlock()
}

// gate waits while the node is paused and, when client is set, while the
// link's client is (a request the client has not sent yet, or a reply it
// cannot read yet; a request already on its way goes on); false when the
// link must end (the node is down, or the link closed).
func (l *link) gate(client bool) bool {
	for {
		l.node.mu.Lock()
		down, p := l.node.down, l.node.paused
		l.node.mu.Unlock()
		if down {
			return false
		}
		if p == nil && client {
			p = l.node.sim.pausedClient(l.client)
		}
		if p == nil {
			select {
			case <-l.done:
				return false
			default:
				return true
			}
		}
		select {
		case <-p:
		case <-l.done:
			return false
		}
	}
}

func (l *link) faults() linkFaults {
	l.node.mu.Lock()
	defer l.node.mu.Unlock()
	return l.node.faults
}

// latency waits for a frame's time on the wire: at least a microsecond,
// and up to bound more, to the nanosecond, so that two frames seldom
// arrive at the same fake instant (where the order in which the runtime
// runs the goroutines they wake would decide what happens next).
func latency(rng *rand.Rand, bound time.Duration) {
	time.Sleep(time.Microsecond + time.Duration(rng.Int64N(int64(wire+bound))))
}

// wire is the spread of a frame's latency on a link without faults.
const wire = 50 * time.Microsecond

// handshake reports whether a request is part of a connection's set-up,
// which go-redis may make while it holds a lock of its own (a PubSub
// reconnecting): such frames pass at once, or the link breaks, and never
// wait on the simulated clock, which a goroutine waiting on that lock would
// stop (synctest does not count a sync.Mutex wait as durable).
func handshake(cmd string) bool {
	switch cmd {
	case "HELLO", "CLIENT", "AUTH", "SELECT", "READONLY":
		return true
	}
	return false
}

// up passes requests from the client to the server.
func (l *link) up() {
	defer l.close()
	frames := make(chan stamped, 1<<16) // never full: the client's writes never block
	go l.read(l.cli, frames)
	setup := true
	for {
		var f stamped
		select {
		case g, ok := <-frames:
			if !ok {
				return
			}
			f = g
		case <-l.done:
			return
		}
		cmd := command(f.frame)
		if setup = setup && handshake(cmd); !setup {
			l.arrive(f.at)
		}
		if !l.request(f.frame, cmd, setup) {
			return
		}
	}
}

// read sends every frame from c to frames until c or the link closes.
func (l *link) read(c net.Conn, frames chan<- stamped) {
	defer close(frames)
	r := bufio.NewReader(c)
	for {
		frame, err := readFrame(r)
		if err != nil {
			return
		}
		select {
		case frames <- stamped{frame: frame, at: time.Now()}:
		case <-l.done:
			return
		}
	}
}

// request passes one request on, or not; false when the link must end.
func (l *link) request(frame []byte, cmd string, setup bool) bool {
	l.node.sim.tokens.saw(l.client, frame)
	f := l.faults()
	var rng *rand.Rand
	switch {
	case setup && l.node.isPaused():
		return false // reset: a paused server accepts nothing new
	case setup:
	case !l.gate(true):
		return false
	default:
		l.node.sim.pauseOnSend(l.client)
		var key uint64
		rng, key = l.node.sim.decisions(l.client, l.node.idx, frame)
		l.mu.Lock()
		if l.first == 0 {
			l.first = key
		}
		l.mu.Unlock()
		latency(rng, f.delay/2)
		if !l.gate(false) || rng.Float64() < f.drop {
			return false
		}
	}
	l.mu.Lock()
	switch cmd {
	case "SUBSCRIBE", "SSUBSCRIBE", "PSUBSCRIBE":
		l.subscriber = true
	}
	if setup {
		l.setupReplies++
	} else if !l.subscriber {
		l.pending = append(l.pending, rng) // its reply's fate, see reply
	}
	l.mu.Unlock()
	l.node.sim.trace.add(l, frame)
	if !setup {
		l.node.sim.sight(frame)
		l.node.sim.tokens.reached(l.node.idx, frame)
	}
	_, err := l.srv.Write(frame)
	return err == nil
}

// drain reads everything the server sends as soon as it is sent, so that
// the server never waits on the link: miniredis hands a published message
// to a subscriber's connection while it holds its own lock, and a server
// stuck on a paused link would stop the simulated clock.
func (l *link) drain() {
	defer close(l.more)
	r := bufio.NewReader(l.srv)
	for {
		frame, err := readFrame(r)
		if err != nil {
			return
		}
		l.mu.Lock()
		l.queue = append(l.queue, stamped{frame: frame, at: time.Now()})
		l.mu.Unlock()
		select {
		case l.more <- struct{}{}:
		default:
		}
	}
}

// down passes replies and pub/sub messages from the server to the client.
func (l *link) down() {
	defer l.close()
	for {
		f, ok := l.next()
		if !ok || !l.reply(f) {
			return
		}
	}
}

// next waits for the next frame from the server; false when there will
// be none.
func (l *link) next() (stamped, bool) {
	for {
		l.mu.Lock()
		if len(l.queue) > 0 {
			f := l.queue[0]
			l.queue = l.queue[1:]
			l.mu.Unlock()
			return f, true
		}
		l.mu.Unlock()
		select {
		case _, ok := <-l.more:
			if !ok {
				return stamped{}, false
			}
		case <-l.done:
			return stamped{}, false
		}
	}
}

// reply passes one frame from the server on, or not; false when the link
// must end.
func (l *link) reply(f stamped) bool {
	frame := f.frame
	push := isPush(frame)
	l.mu.Lock()
	setup := l.setupReplies > 0 && !push
	if setup {
		l.setupReplies--
	}
	l.mu.Unlock()
	if !setup { // see handshake
		l.arrive(f.at)
		if deliver, keep := l.fate(frame, push); !deliver {
			return keep
		}
	}
	_, err := l.cli.Write(frame)
	return err == nil
}

// fate inflicts the faults in force on a frame from the server that is no
// reply to the handshake: deliver says whether it goes on, keep (when it
// does not) whether the link stays.
func (l *link) fate(frame []byte, push bool) (deliver, keep bool) {
	if !l.gate(true) {
		return false, false
	}
	f := l.faults()
	var rng *rand.Rand
	l.mu.Lock()
	subscriber := l.subscriber
	if !push && !subscriber && len(l.pending) > 0 {
		rng = l.pending[0]
		l.pending = l.pending[1:]
	}
	l.mu.Unlock()
	if rng == nil { // a push, or a reply that no request past the handshake asked for
		rng, _ = l.node.sim.decisions(l.client, l.node.idx, frame)
	}
	switch {
	case push && rng.Float64() < f.losePush:
		return false, true // counted by the node, never delivered
	case !push && !subscriber && rng.Float64() < f.loseReply:
		return false, false // applied, and the reply is lost with the connection
	}
	latency(rng, f.delay/2)
	return l.gate(true), false
}

// key is the link's first request past the handshake, 0 before it.
func (l *link) key() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}
