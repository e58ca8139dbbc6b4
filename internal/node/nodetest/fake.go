// Package nodetest is an in-memory node.Node with injectable faults, for
// the tests of every layer above the node layer. Keys expire on the clock
// (virtual, under testing/synctest, or aged by hand: see Age). It answers
// each operation as the Lua scripts do, every kind of lock seeing the
// others' keys as the scripts see them; the cases of
// internal/node/conformance run on a fake as on the scripts themselves
// (miniredis, and every server of the matrix), so that neither can change
// alone. The scripts
// are also tested against real Redis.
package nodetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// Fake is an in-memory node. Its exported fields are its faults and its
// state: change them with Faults, since calls may be in flight.
type Fake struct {
	Name string

	mu       sync.Mutex
	Data     map[string]Entry
	Delay    time.Duration            // before each call is applied
	Err      error                    // every call fails with it, without effect
	Lose     bool                     // calls take effect but the reply is lost
	IDs      []string                 // what Identify answers; nil: the fake's name
	Restarts int                      // restart calls: each is another run id
	Resend   bool                     // releases are applied twice, as a client retry after a lost reply does; the second reply comes back
	Hang     chan struct{}            // calls block until it is closed, then apply
	OpDelay  map[string]time.Duration // extra delay of one kind of call
	ErrOnly  string                   // when set, Err applies to this kind of call only
	Calls    map[string]int
	Applied  []string // ops applied, in order: "acquire", "release", ...
	Subs     []*Sub
	Mute     bool // publish delivers nothing, and no one subscribes
	// Lost makes publish count the subscribers and deliver nothing, as
	// when a subscriber drops after it was counted.
	Lost bool
	// Elsewhere puts the node's subscriptions on other servers of a Redis
	// Cluster than the one that runs its scripts: they hear every message
	// (over the cluster bus), but PUBLISH and PUBSUB NUMSUB count none of
	// them, since each counts the subscribers of one server.
	Elsewhere bool
	Published int                         // releases announced
	Counters  map[string]uint64           // fencing counters: no expiry
	Queues    map[string]map[string]int64 // waiters' queues: member → score
	UpSince   time.Time                   // the node's start, for restart delays
	Sharded   bool                        // laid out as a Redis Cluster node
	Acked     int                         // replicas that acknowledge each write, for node.Ack
	Sems      map[string]*Sem             // semaphores by name
	// NoScripts makes the node one whose user is refused scripts: it
	// speaks transactions (node.Transactions), and refuses what needs
	// scripts as such a node does (node.WithoutScripts).
	NoScripts bool
	// ClockOffset moves the node's wall clock (the time its Timed replies
	// carry) away from this process's. It does not expire keys: move the
	// keys' time with Age, as a jump would.
	ClockOffset time.Duration
	// NoTime makes the node's votes carry no time, as a reply whose
	// batch's TIME failed does.
	NoTime bool
	// Readers are the readers of reader-writer locks by name: each
	// reader's token and when its hold expires, as rw.lua keeps them. A
	// waiting writer's mark is an Entry of Data (see node.IntentKey).
	Readers map[string]map[string]time.Time
	// Facts is what an audit reads (node.Auditor); nil: a server with
	// default settings whose user may run everything.
	Facts *node.Facts

	lanesMu sync.Mutex
	lanes   map[string][]laneCall // per lock name: calls not yet answered, in order
}

// errRefused is a NoScripts node's refusal of scripts, as Redis 7 words it.
var errRefused = errors.New("NOPERM User redlock has no permissions to run the 'evalsha' command")

// Entry is one lock key.
type Entry struct {
	Value   string // the token, or the owner of a reentrant (hash) lock
	Expires time.Time
	Hash    bool
	Holds   int
}

// ErrLostReply is the error of a call whose reply the fake lost.
var ErrLostReply = errors.New("fake: reply lost")

// New returns a fake node called name.
func New(name string) *Fake {
	return &Fake{Name: name, Data: map[string]Entry{}, Calls: map[string]int{}, Counters: map[string]uint64{},
		Queues: map[string]map[string]int64{}, UpSince: time.Now(), Sems: map[string]*Sem{},
		Readers: map[string]map[string]time.Time{}}
}

// Fakes returns n fresh fakes, named fake0, fake1, ...
func Fakes(n int) []*Fake {
	fs := make([]*Fake, n)
	for i := range fs {
		fs[i] = New("fake" + string(rune('0'+i)))
	}
	return fs
}

// Nodes returns the fakes as nodes: several Redlocks, as several
// processes would, can share them.
func Nodes(fs []*Fake) []node.Node {
	ns := make([]node.Node, len(fs))
	for i, f := range fs {
		ns[i] = f
	}
	return ns
}

// Faults changes the node's faults or state under its lock: calls may be
// in flight.
func (n *Fake) Faults(change func(n *Fake)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	change(n)
}

// Unhang lets hung calls finish, so that a Redlock can close.
func (n *Fake) Unhang() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.Hang != nil {
		select {
		case <-n.Hang:
		default:
			close(n.Hang)
		}
	}
}

// Restart stands for a restart without persistence: every key and counter
// is gone, and the node's uptime starts again.
func (n *Fake) Restart() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.Data = map[string]Entry{}
	n.Counters = map[string]uint64{}
	n.Sems = map[string]*Sem{}
	n.Readers = map[string]map[string]time.Time{}
	n.UpSince = time.Now()
	n.Restarts++ // another server process: another run id
}

// Jump steps the node's wall clock by d, as an NTP step or an operator's
// date does to a Redis server: the time its replies carry moves by d, and
// a forward step brings every expiry d closer (Redis expires by its wall
// clock).
func (n *Fake) Jump(d time.Duration) {
	n.mu.Lock()
	n.ClockOffset += d
	n.mu.Unlock()
	if d > 0 {
		n.Age(d)
	}
}

// Age moves every expiry of the node d closer, as if d had passed on its
// clock: for tests that cannot run the fake under testing/synctest (beside
// a real server, say). The node's uptime grows by d too.
func (n *Fake) Age(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, e := range n.Data {
		e.Expires = e.Expires.Add(-d)
		n.Data[k] = e
	}
	for _, s := range n.Sems {
		for tok, exp := range s.Holders {
			s.Holders[tok] = exp.Add(-d)
		}
	}
	for _, rs := range n.Readers {
		for tok, exp := range rs {
			rs[tok] = exp.Add(-d)
		}
	}
	n.UpSince = n.UpSince.Add(-d)
}

// Counter returns the node's fencing counter for key.
func (n *Fake) Counter(key string) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.Counters[key]
}

// Addr implements node.Node.
func (n *Fake) Addr() string { return n.Name }

// Layout implements node.Node.
func (n *Fake) Layout() node.Layout { return node.Layout{Sharded: n.Sharded} }

// identify names the servers behind the fake: IDs when set, else its name.
func (n *Fake) identify() []string {
	if n.IDs != nil {
		return n.IDs
	}
	if n.Restarts > 0 {
		return []string{fmt.Sprintf("%s-run%d", n.Name, n.Restarts)}
	}
	return []string{n.Name}
}

// Get returns key's value if it exists and has not expired.
func (n *Fake) Get(key string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.Data[key]
	if !ok || !time.Now().Before(e.Expires) {
		return "", false
	}
	return e.Value, true
}

// Set sets key to value for ttl, as another client would.
func (n *Fake) Set(key, value string, ttl time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.Data[key] = Entry{Value: value, Expires: time.Now().Add(ttl)}
}

// TTL returns how long key has to live.
func (n *Fake) TTL(key string) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return time.Until(n.Data[key].Expires)
}

// PublishedCount returns how many releases the node announced.
func (n *Fake) PublishedCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.Published
}

// Expiry returns when key expires on this node (zero if absent).
func (n *Fake) Expiry(key string) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.Data[key].Expires
}

// Count returns how many calls of kind op the node got.
func (n *Fake) Count(op string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.Calls[op]
}

// Waiting returns the members of queue key.
func (n *Fake) Waiting(key string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for m := range n.Queues[key] {
		out = append(out, m)
	}
	return out
}

// Do implements node.Node: it runs op on the fake's own goroutine, as a
// transport's worker would, and hands the reply to done. Operations of one
// lock name (see node.Laned) are applied in the order Do was called for
// them, one after the other, as a transport's lane sends them: each waits
// until the one before has been answered (its delay included). The
// extensions of node.Extensions are each applied as an Extend.
func (n *Fake) Do(ctx context.Context, sendBy time.Time, op node.Op, done func(node.Reply)) {
	if m, ok := op.(*node.Extensions); ok {
		node.DoEach(m, func(e node.Op, done func(node.Reply)) { n.Do(ctx, sendBy, e, done) }, done)
		return
	}
	name := node.LaneOf(op)
	if name == "" {
		go func() { done(n.answer(op)) }()
		return
	}
	n.lanesMu.Lock()
	if n.lanes == nil {
		n.lanes = map[string][]laneCall{}
	}
	queued := n.lanes[name]
	n.lanes[name] = append(queued, laneCall{op: op, done: done})
	n.lanesMu.Unlock()
	if len(queued) == 0 {
		go n.runLane(name)
	}
}

// laneCall is an operation waiting in its lane.
type laneCall struct {
	op   node.Op
	done func(node.Reply)
}

// runLane answers the calls of lane name in order until none is left.
func (n *Fake) runLane(name string) {
	for {
		n.lanesMu.Lock()
		c := n.lanes[name][0]
		n.lanesMu.Unlock()
		c.done(n.answer(c.op))
		n.lanesMu.Lock()
		rest := n.lanes[name][1:]
		if len(rest) == 0 {
			delete(n.lanes, name)
			n.lanesMu.Unlock()
			return
		}
		n.lanes[name] = rest
		n.lanesMu.Unlock()
	}
}

// Way implements the Redis node's report of how it is spoken to.
func (n *Fake) Way() node.Way {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.NoScripts {
		return node.Transactions
	}
	return node.Scripts
}

// answer applies op and returns the node's reply, with the node's time
// when op is Timed (see ClockOffset) and asks for it (a plain grant may
// not, see node.Acquire.Clock).
func (n *Fake) answer(op node.Op) node.Reply {
	rep := n.apply1(op)
	if _, ok := op.(node.Timed); ok && rep.Err == nil && !n.Sharded && !n.NoTime {
		if a, ok := op.(*node.Acquire); !ok || a.Clocked() {
			rep.Time = n.Now()
		}
	}
	return rep
}

// Now is the node's wall clock: this process's, moved by ClockOffset.
func (n *Fake) Now() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return time.Now().Add(n.ClockOffset)
}

// apply1 applies op and returns the node's reply.
func (n *Fake) apply1(op node.Op) node.Reply {
	if _, runs := op.(node.Runner); !runs && n.Way() != node.Scripts { // a Runner needs no script
		if err := node.WithoutScripts(op, errRefused); err != nil {
			return node.Reply{Err: err}
		}
	}
	if rep, ok := n.lockOp(op); ok {
		return rep
	}
	switch o := op.(type) {
	case *node.Queue:
		return n.reply(n.queue(o))
	case *node.Inspect:
		return n.inspect(o)
	case node.Identify:
		return n.identifyOp()
	case node.Clock:
		return node.Reply{OK: true}
	}
	return node.Reply{Err: fmt.Errorf("fake: unknown operation %T", op)}
}

func (n *Fake) reply(ok bool, err error) node.Reply { return node.Reply{OK: ok, Err: err} }

// acked is rep, the reply of a write asked to be acknowledged by a's
// replicas, as the node answers it with Acked of them acknowledging.
func (n *Fake) acked(a node.Ack, rep node.Reply) node.Reply {
	if a.Replicas == 0 || !rep.OK || rep.Err != nil {
		return rep
	}
	n.mu.Lock()
	acked := n.Acked
	n.mu.Unlock()
	if err := a.Short(int64(acked)); err != nil {
		return node.Reply{Err: err, Value: rep.Value}
	}
	return rep
}

// Ping implements node.Node: it answers like any call, with the node's
// faults: an error a server would send comes back as such, as go-redis
// returns it.
func (n *Fake) Ping(context.Context) error {
	_, err := n.apply("ping", "", func() bool { return true })
	return err
}

// Audit implements node.Auditor: Facts, or Err when ErrOnly is "audit".
// It is neither counted nor recorded among the calls applied: audits run
// in the background, and the tests of the lock's calls do not expect them.
func (n *Fake) Audit(context.Context) (node.Facts, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.Err != nil && n.ErrOnly == "audit" {
		return node.Facts{}, n.Err
	}
	if n.Facts != nil {
		return *n.Facts, nil
	}
	return node.Facts{Clocked: true, Info: map[string]string{"redis_version": "7.0.15", "role": "master", "connected_slaves": "0",
		"maxmemory": "0", "maxmemory_policy": "noeviction", "aof_enabled": "1"},
		Config: map[string]string{"appendonly": "yes", "appendfsync": "always"}, User: "default", DryRun: true, Rights: map[string]error{}}, nil
}

// apply runs one call with the node's faults around fn, which runs under
// n.mu with expired keys already purged.
func (n *Fake) apply(op, key string, fn func() bool) (bool, error) {
	n.mu.Lock()
	n.Calls[op]++
	delay, err, lose, hang := n.Delay+n.OpDelay[op], n.Err, n.Lose, n.Hang
	if n.ErrOnly != "" && n.ErrOnly != op {
		err = nil
	}
	n.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	if hang != nil {
		<-hang
	}
	if err != nil {
		return false, err
	}
	n.mu.Lock()
	if e, ok := n.Data[key]; ok && !time.Now().Before(e.Expires) {
		delete(n.Data, key)
	}
	ok := fn()
	if ok && op != "ping" {
		n.Applied = append(n.Applied, op)
	}
	n.mu.Unlock()
	if lose {
		return false, ErrLostReply
	}
	return ok, nil
}

// script runs one call as apply does, fn answering as a script does:
// whether it granted, or an error reply, which changes nothing. The
// node's faults come first: their error is returned, not fn's.
func (n *Fake) script(op, key string, fn func() (bool, error)) (bool, error) {
	var refusal error
	ok, err := n.apply(op, key, func() bool {
		var ok bool
		ok, refusal = fn()
		return ok
	})
	if err != nil {
		return false, err
	}
	return ok, refusal
}

// identifyOp answers who the node is at once, whatever its faults: the
// tests of faults are about the lock's requests, and each of them would
// otherwise also have to arrange the first acquisition's identification.
func (n *Fake) identifyOp() node.Reply {
	n.mu.Lock()
	delay := n.OpDelay["identify"]
	n.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return node.Reply{OK: true, Value: n.identify()}
}
