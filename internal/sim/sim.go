// Package sim is a deterministic-schedule simulator of the library: several
// clients, each a real Redlock over real go-redis clients, run workloads of
// every primitive against simulated nodes (miniredis servers running the
// library's own scripts) reached through links that delay, drop and lose
// frames, while a nemesis pauses, kills, restarts and moves the clocks of
// nodes, cuts clients off and pauses clients' processes. Everything runs
// in one testing/synctest bubble, on its fake clock, and every fault is
// drawn from one seed; the history of holds is checked against the
// guarantees the library states (see check.go).
//
// What a seed fixes: the deployment (nodes, which are cluster-like), the
// workload, every fault of the nemesis, each frame's latency and fate (drawn
// from the seed and the frame, not from the link that carried it), the
// library's random waits and tokens (internal/jitter, and crypto/rand
// through testing/cryptotest), and when garbage is collected. The tests run
// Go on one thread (GOMAXPROCS=1). What it cannot fix: the order in which
// goroutines ready at one fake instant run where the runtime decides it (a
// select between ready channels picks at random; whether a sync.Mutex goes
// to its waiter depends on the wall clock); clients, workers, frames and
// broken links are set apart in time so that few are. A run's digest
// (trace.go) tells whether a replay is the same run: over seeds 1-30, 81 of
// 90 pairs of runs of a seed were.
//
// Nothing imports it. It knows the library only through the facade, as a
// user does, and seeds internal/jitter; it may not reach below the facade
// to make a run pass.
package sim

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlock"
)

// Config is what a run is made of; Plan draws one from a seed.
type Config struct {
	Seed        uint64
	Nodes       int
	Clients     int
	ClusterLike []bool        // per node
	Faults      time.Duration // how long the nemesis runs
	Heal        time.Duration // then how long everything runs fault-free
	Primitives  []string      // the workloads each client runs, see workloads
	TTL         time.Duration // the TTL of most locks
	Trace       bool          // keep every request of the trace, not only its hash
	Sites       bool          // nodes and clients in three data centres (see sites.go)
}

// Plan draws a run's configuration from seed.
func Plan(seed uint64) Config {
	rng := rand.New(rand.NewPCG(seed, 0))
	c := Config{
		Seed:    seed,
		Nodes:   []int{3, 5, 5}[rng.IntN(3)],
		Clients: 2 + rng.IntN(3),
		Faults:  time.Duration(1+rng.IntN(4)) * time.Second,
		TTL:     []time.Duration{300 * time.Millisecond, time.Second, 2 * time.Second}[rng.IntN(3)],
	}
	// After the faults: the clock guard's wait (a TTL), then long enough for
	// every worker to get a turn.
	c.Heal = 3*time.Second + 3*c.TTL
	for range c.Nodes {
		c.ClusterLike = append(c.ClusterLike, rng.Float64() < 0.3)
	}
	all := workloadNames()
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	c.Primitives = all[:2+rng.IntN(len(all)-1)]
	c.Sites = drawSites(seed)
	return c
}

func (c Config) String() string {
	var cl []string
	for i, on := range c.ClusterLike {
		if on {
			cl = append(cl, fmt.Sprint(i))
		}
	}
	return fmt.Sprintf("seed %d: %d nodes (cluster-like: %s), %d clients, ttl %v, faults %v then %v healed, workloads %s%s",
		c.Seed, c.Nodes, strings.Join(cl, ","), c.Clients, c.TTL, c.Faults, c.Heal, strings.Join(c.Primitives, ","), c.sitesString())
}

// Sim is one run.
type Sim struct {
	cfg   Config
	seed  uint64
	nodes []*node
	hist  *history
	log   *eventLog
	trace *trace

	undos []undo // the nemesis' faults still on, with when each ends
	// early restarts so far, and the stream that times them (restartEarly)
	early    int
	earlyRng *rand.Rand
	tokens   *tokens       // who sent which token, for the verdicts' truth
	watched  []watchedName // the names whose refusals are judged (see sight)

	mu     sync.Mutex
	cut    map[[2]int]bool       // client, node: partitioned
	frozen map[int]chan struct{} // client: its process paused, closed on resume
	onSend map[int]time.Duration // client: pause it this long once it sends its next request
	dials  map[[2]int]int        // client, node: links dialled so far
	seen   map[uint64]int        // frames that passed, see decisions
	breaks *rand.Rand            // when each link the nemesis breaks closes

	// linked counts the links' goroutines: the run waits for them after
	// closing the nodes, or one asleep on a frame's latency outlives it
	// (synctest: "blocked goroutines remain", seed 2194).
	linked sync.WaitGroup
}

// Result is what a run found.
type Result struct {
	Config       Config
	Acquisitions int
	Violations   []string
	Stalled      []string // workers that got no turn once the faults healed
	Events       []string // the nemesis' schedule, for a replay
	Trace        *trace   // every request the nodes received
	Digest       string   // the trace's length and hash: equal digests, the same run
}

// Run runs cfg; it must be called inside a synctest bubble.
func Run(cfg Config) Result {
	s := &Sim{cfg: cfg, seed: cfg.Seed, hist: newHistory(), log: &eventLog{}, trace: newTrace(cfg.Nodes, cfg.Trace),
		cut: map[[2]int]bool{}, frozen: map[int]chan struct{}{}, onSend: map[int]time.Duration{}, dials: map[[2]int]int{}, seen: map[uint64]int{}}
	s.breaks = s.rng(4)
	s.earlyRng = s.rng(6)
	s.tokens = newTokens()
	for _, p := range cfg.Primitives {
		if refusable[p] {
			s.watch(resources[p][0])
		}
	}
	done := make(chan struct{})
	var bg sync.WaitGroup
	for i := range cfg.Nodes {
		n := newNode(s, i)
		n.clusterLike = cfg.ClusterLike[i]
		s.nodes = append(s.nodes, n)
		rng := s.rng(uint64(1000 + i))
		bg.Go(func() { n.runBus(done, rng) })
	}
	bg.Go(func() { s.runClocks(done) })
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(8 << 30)) // if collect failed
	bg.Go(func() { s.collect(done) })

	// Clients and workers start a random number of nanoseconds apart: the
	// periodic work of processes started at one instant would otherwise
	// fall due at one instant, where the order in which the runtime runs
	// the goroutines decides what happens next, and a replay could differ.
	apart := s.rng(3)
	var clients []*client
	for c := range cfg.Clients {
		time.Sleep(time.Duration(apart.Int64N(int64(time.Millisecond))))
		clients = append(clients, s.newClient(c))
	}
	var stops []context.CancelFunc
	var workers sync.WaitGroup
	for _, c := range clients {
		for w, name := range cfg.Primitives {
			rng := s.rng(uint64(2000 + 100*c.idx + w))
			d := time.Duration(apart.Int64N(int64(time.Millisecond)))
			ctx, stop := context.WithCancel(context.Background())
			stops = append(stops, stop)
			workers.Go(func() {
				time.Sleep(d)
				workloads[name](ctx, s, c, rng)
			})
		}
	}
	s.nemesis(s.rng(1), cfg.Faults)
	s.heal()
	// Once healed, a node whose clock stepped back votes again after the
	// longest TTL (the clock guard); then every worker is to get its turn.
	settled := time.Now().Add(cfg.TTL)
	time.Sleep(cfg.Heal)
	stopped := time.Now()
	for _, stop := range stops { // apart too
		time.Sleep(time.Duration(apart.Int64N(int64(time.Millisecond))))
		stop()
	}
	workers.Wait()
	for _, c := range clients {
		c.close()
	}
	close(done)
	bg.Wait()
	for _, n := range s.nodes {
		n.close()
	}
	s.linked.Wait()
	return Result{Config: cfg, Acquisitions: s.hist.acquisitions(), Violations: s.hist.check(),
		Stalled: s.hist.stalled(cfg.Clients, cfg.Primitives, settled, stopped), Events: s.log.lines(), Trace: s.trace,
		Digest: s.trace.digest()}
}

// rng returns a generator for one stream of decisions of this run.
func (s *Sim) rng(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(s.seed, stream))
}

// A client is one process: a Redlock over its own go-redis clients.
type client struct {
	idx      int
	rl       *redlock.Redlock
	clients  []*redis.Client
	renewals *renewals // renewal's verdicts, when "renewed" runs
}

func (s *Sim) newClient(idx int) *client {
	c := &client{idx: idx}
	var ucs []redis.UniversalClient
	for i := range s.nodes {
		rc := redis.NewClient(&redis.Options{
			// An address literal, never dialled (the dialer below connects):
			// go-redis resolves a host name to classify it.
			Addr: fmt.Sprintf("127.0.0.1:%d", 16379+i),
			// go-redis' defaults but two: it sleeps between dial attempts and
			// between retries while it holds a PubSub's lock, and a goroutine
			// waiting on a lock stops synctest's clock. Retries stay on.
			DialerRetries:   1,
			MinRetryBackoff: -1,
			Dialer: func(context.Context, string, string) (net.Conn, error) {
				return s.dial(idx, i)
			},
		})
		c.clients = append(c.clients, rc)
		ucs = append(ucs, rc)
	}
	rl, err := redlock.New(ucs, s.observe(c)...)
	if err != nil {
		panic(err)
	}
	c.rl = rl
	return c
}

func (c *client) close() {
	_ = c.rl.Close(context.Background())
	for _, rc := range c.clients {
		_ = rc.Close()
	}
}

// dial connects client c to node i through a new link.
func (s *Sim) dial(c, i int) (net.Conn, error) {
	n := s.nodes[i]
	s.mu.Lock()
	cut := s.cut[[2]int{c, i}]
	k := s.dials[[2]int{c, i}]
	s.dials[[2]int{c, i}]++
	s.mu.Unlock()
	m := n.server()
	if cut || m == nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errRefused}
	}
	srv, err := m.Dial()
	if err != nil {
		return nil, err
	}
	cli, end := net.Pipe()
	l := &link{node: n, client: c, dial: k, cli: end, srv: srv, wan: s.siteDelay(c, n.idx),
		done: make(chan struct{}), more: make(chan struct{}, 1)}
	n.mu.Lock()
	if n.down || n.m != m {
		n.mu.Unlock()
		_ = srv.Close()
		_ = end.Close()
		_ = cli.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errRefused}
	}
	n.links[l] = struct{}{}
	n.mu.Unlock()
	s.linked.Go(l.up)
	s.linked.Go(l.drain)
	s.linked.Go(l.down)
	return cli, nil
}

// decisions returns the decisions of the faults a frame between client c
// and node i meets (a request's, and then its reply's), and their key:
// drawn from the seed, the client, the node, the frame and how many such
// frames passed before it, never from which link carried it or in which
// order links were dialled, which the runtime's order of goroutines
// ready at one instant decides.
func (s *Sim) decisions(c, i int, frame []byte) (*rand.Rand, uint64) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d %d %q", c, i, canonical(frame))
	s.mu.Lock()
	k := s.seen[h.Sum64()]
	s.seen[h.Sum64()]++
	s.mu.Unlock()
	key := h.Sum64() + uint64(k)
	return s.rng(key), key
}

// partition cuts client c off node i, or joins them again.
func (s *Sim) partition(c, i int, on bool) {
	s.mu.Lock()
	s.cut[[2]int{c, i}] = on
	s.mu.Unlock()
	if !on {
		return
	}
	n := s.nodes[i]
	n.mu.Lock()
	var mine []*link
	for l := range n.links {
		if l.client == c {
			mine = append(mine, l)
		}
	}
	n.mu.Unlock()
	s.breakApart(mine)
}

// freeze pauses client c's process as the nodes and its holders see it:
// until thaw, no frame passes on any of its links in either direction, and
// none of its holders acts (work waits in awake). Its go-redis goroutines
// still run (renewal, retries, pub/sub), but what they send waits with the
// rest, and its clock runs on: a real pause seen from outside. False when
// c is paused already.
func (s *Sim) freeze(c int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen[c] != nil {
		return false
	}
	s.frozen[c] = make(chan struct{})
	return true
}

// thaw ends client c's pause; false when it was not paused.
func (s *Sim) thaw(c int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.frozen[c]
	if ch == nil {
		return false
	}
	close(ch)
	delete(s.frozen, c)
	return true
}

// pauseAfterSend pauses client c for d right after it sends its next
// request (the request goes on, its reply waits): a pause between a request
// and its reply, such as a collection that the request's own allocations
// started.
func (s *Sim) pauseAfterSend(c int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onSend[c] = d
}

// pauseOnSend starts the pause pauseAfterSend set for client c, if any.
func (s *Sim) pauseOnSend(c int) {
	s.mu.Lock()
	d, ok := s.onSend[c]
	delete(s.onSend, c)
	s.mu.Unlock()
	if !ok || !s.freeze(c) {
		return
	}
	s.log.add("pause client %d's process for %v, right after it sent a request", c, d)
	time.AfterFunc(d, func() {
		if s.thaw(c) {
			s.log.add("resume client %d's process", c)
		}
	})
}

// resumeAll calls off the pauses waiting for a request, and ends those
// under way.
func (s *Sim) resumeAll() {
	s.mu.Lock()
	clear(s.onSend)
	var paused []int
	for c := range s.frozen {
		paused = append(paused, c)
	}
	s.mu.Unlock()
	slices.Sort(paused)
	for _, c := range paused {
		if s.thaw(c) {
			s.log.add("resume client %d's process", c)
		}
	}
}

// pausedClient is closed when client c's pause ends; nil while c runs.
func (s *Sim) pausedClient(c int) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frozen[c]
}

// awake waits while client c's process is paused.
func (s *Sim) awake(c int) {
	if ch := s.pausedClient(c); ch != nil {
		<-ch
	}
}

// breakApart closes links, each up to a microsecond after the other, in an
// order drawn from the seed: clients whose connections broke at one
// instant would otherwise retry at one instant (go-redis waits a fixed
// time between a PubSub's attempts), where the order in which the runtime
// runs their goroutines decides what the node receives first.
func (s *Sim) breakApart(links []*link) {
	slices.SortFunc(links, func(a, b *link) int {
		return cmp.Or(cmp.Compare(a.client, b.client), cmp.Compare(a.node.idx, b.node.idx), cmp.Compare(a.key(), b.key()), cmp.Compare(a.dial, b.dial))
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range links {
		time.AfterFunc(time.Duration(1+s.breaks.Int64N(int64(time.Microsecond))), l.close)
	}
}

// collect collects garbage, at instants drawn from the seed, once the heap
// has grown by collectEvery: the run turns the collector off. A collection
// the runtime starts by itself stops goroutines where the wall clock says,
// and they resume in another order, so that a replay would not be the
// same run; one run allocates gigabytes (miniredis makes a Lua state per
// script call).
func (s *Sim) collect(done <-chan struct{}) {
	rng := s.rng(5)
	heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	for {
		select {
		case <-done:
			return
		case <-time.After(10*time.Millisecond + time.Duration(rng.Int64N(int64(time.Millisecond)))):
		}
		metrics.Read(heap)
		if heap[0].Value.Uint64() > collectEvery {
			runtime.GC()
		}
	}
}

const collectEvery = 512 << 20

// runClocks keeps the clocks of nodes that are off running, every 5 ms.
func (s *Sim) runClocks(done <-chan struct{}) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			for _, n := range s.nodes {
				n.tickClock()
			}
		}
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// eventLog is the nemesis' schedule, with the fake time of each event.
type eventLog struct {
	mu    sync.Mutex
	start time.Time
	ev    []string
}

func (e *eventLog) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.start.IsZero() {
		e.start = time.Now()
	}
	e.ev = append(e.ev, fmt.Sprintf("%8v  ", time.Since(e.start).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

func (e *eventLog) lines() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ev
}
