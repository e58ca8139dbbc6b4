// Package conformance states once what a node does with each operation,
// as cases: sequences of operations on one name, each with the answer the
// layers above must read of its reply. Every way of speaking to a node
// (scripts, transactions, native commands) runs the same cases, on
// miniredis in the unit tests and on every server of the matrix in the
// integration tests, and so does the fake the unit tests of the layers
// above run on. Where a way cannot do what a case needs, the table of
// ways (Lacks) says so, and the suite checks the table: such a case must
// fail on that way, or the table is out of date.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
)

// Step is one thing a case does to a node: send op, or (op nil) let wait
// pass on the node's clock, or subscribe to the name's release channel
// (listen), or to a process's wake channel (wake).
type step struct {
	op     node.Op
	wait   time.Duration
	listen bool
	wake   string
	want   answer
}

// answer is what the layers above read of a reply: OK, the class of the
// error, and the fields of its Value.
type answer struct {
	OK  bool
	Err string // "", misconfigured, recovering, or "unexpected: " and the error
	// node.Grant
	Holder  string
	Counter uint64
	// node.Released; Server is set when it names the node's own server
	// (see Side.run)
	Gone, Taken, Named, Server bool
	Heard                      int
	// node.SemGrant
	Holders int
	// node.ReadRefusal
	WriterWaits bool
	// node.Forced: Holder, Heard and Named above, and
	Reentrant bool
	// node.KeyState
	State state
}

// state is what an Inspect reads. Times to live are rounded to the second:
// a real server's clock runs while the case does.
type state struct {
	Held, Reentrant, Semaphore, Readers bool
	Holder                              string
	Holds, Permits                      int
	Counter                             uint64
	TTL                                 time.Duration
	Holders                             []string // token/ttl of each live permit or reader, in the node's order
}

// The classes of error a node's reply is read as.
const (
	misconfigured = "misconfigured"
	recovering    = "recovering"
)

// answerOf reads rep as the layers above do.
func answerOf(rep node.Reply) answer {
	a := answer{OK: rep.OK, Err: errClass(rep.Err)}
	switch v := rep.Value.(type) {
	case node.Grant:
		a.Holder, a.Counter = v.Holder, v.Counter
	case node.Released:
		a.Gone, a.Taken, a.Named, a.Heard = v.Gone, v.Taken, v.Named, v.Heard
	case node.SemGrant:
		a.Holders = v.Holders
	case node.ReadRefusal:
		a.WriterWaits = v.WriterWaits
	case node.Forced:
		a.Holder, a.Reentrant, a.Heard, a.Named = v.Holder, v.Reentrant, v.Released.Heard, v.Released.Named
	case node.KeyState:
		a.State = stateOf(v)
	}
	return a
}

// stateOf is what the layers above read of an Inspect.
func stateOf(v node.KeyState) state {
	st := state{Held: v.Held, Reentrant: v.Reentrant, Semaphore: v.Semaphore, Readers: v.Readers, Holder: v.Holder,
		Holds: v.Holds, Permits: v.Permits, Counter: v.Counter, TTL: v.TTL.Round(time.Second)}
	for _, p := range v.Holders {
		st.Holders = append(st.Holders, fmt.Sprintf("%s/%v", p.Token, p.TTL.Round(time.Second)))
	}
	return st
}

// errClass names the class of err as the layers above tell it, with
// errors.Is: a misconfigured node (a script's WRONGTYPE reply, or a
// semaphore's count mismatch), a recovering one, or anything else.
func errClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(node.Classify(err), node.ErrMisconfigured):
		return misconfigured
	case errors.Is(err, node.ErrNodeRecovering):
		return recovering
	}
	return "unexpected: " + err.Error()
}

// Side is one node the cases run on, spoken to in one way.
type Side struct {
	// Name names the side in failures.
	Name string
	// Way is how the node is spoken to: what it lacks is Lacks[Way].
	Way node.Way
	// Node is the node, with nothing on it under the cases' keys.
	Node node.Node
	// Pass lets d pass on the node's clock: ages a fake, sets a miniredis'
	// time and fast-forwards its keys, sleeps beside a real server.
	Pass func(d time.Duration)
	// Listening waits until the node counts a subscriber on channel
	// (SUBSCRIBE returns before the server applied it).
	Listening func(t *testing.T, channel string)
	// Real is set for a real server, whose clock runs by itself: its
	// cases run side by side, each on its own name. The others' Pass
	// moves the clock of every key at once, so their cases run one after
	// the other.
	Real bool
}

// run runs steps on s and returns the answers of the whole sequence. A
// release that names a server must name the node's own (its run id, as
// Identify reads it): another is an unexpected answer. A node that has
// no run id to say (a miniredis has no INFO server section) cannot show
// whether a release names it: its answer is taken as the case's.
func (s *Side) run(t *testing.T, key string, steps []step) []answer {
	t.Helper()
	server := runID(s.Node)
	out := make([]answer, len(steps))
	for i, st := range steps {
		switch {
		case st.op != nil:
			rep := call(s.Node, st.op)
			out[i] = answerOf(rep)
			r, _ := rep.Value.(node.Released)
			switch {
			case r.Server != "" && r.Server != server:
				out[i].Err = fmt.Sprintf("unexpected: the release names server %q, the node is %q", r.Server, server)
			case server == "":
				out[i].Server = st.want.Server
			default:
				out[i].Server = r.Server != ""
			}
		case st.listen || st.wake != "":
			channel := node.ReleaseChannel(key)
			if st.wake != "" {
				channel = node.WakeChannel(st.wake)
			}
			sub := s.Node.Subscribe()
			t.Cleanup(func() { _ = sub.Close() })
			require.NoError(t, sub.Subscribe(context.Background(), channel))
			s.Listening(t, channel)
		default:
			s.Pass(st.wait)
		}
	}
	return out
}

// call sends o to n and waits for its reply.
func call(n node.Node, o node.Op) node.Reply {
	ch := make(chan node.Reply, 1)
	n.Do(context.Background(), time.Now().Add(time.Minute), o, func(r node.Reply) { ch <- r })
	return <-ch
}

// runID is the run id of the server behind n, "" when it does not say (a
// miniredis has no INFO server section).
func runID(n node.Node) string {
	ids, _ := call(n, node.Identify{}).Value.([]string)
	if len(ids) != 1 {
		return ""
	}
	return ids[0]
}

// Case is one sequence of steps on one fresh name.
type Case struct {
	Name string
	// Needs is what of the node the case needs beyond the plain lock's
	// grant, extension and release.
	Needs []Capability
	steps func(k string) []step
}

// Cases returns every case: the plain, fenced, reentrant and multi-name
// locks, the waiters' queue and the hand-over, the semaphore, the
// reader-writer lock, and the operator's Inspect and forced Release.
func Cases() []Case {
	return slices.Concat(lockCases(), multiCases(), semCases(), rwCases(), operatorCases())
}

// Run runs every case on every side, each case on a fresh name (prefix and
// its index), and checks each side's answers against the case's, as the
// side's way gives them (see Lacks): a case that needs what a way lacks
// runs there too, and must disagree with the case at some step, or the
// table of ways is out of date. A case needing a kind of lock the way
// refuses is not run there: Refuses checks the refusal.
func Run(t *testing.T, prefix string, sides []*Side, cases []Case) {
	t.Helper()
	real := !slices.ContainsFunc(sides, func(s *Side) bool { return !s.Real })
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if real {
				t.Parallel()
			}
			key := fmt.Sprintf("%s:%d", prefix, i)
			var wg sync.WaitGroup
			got := make([][]answer, len(sides))
			for j, s := range sides {
				if skipped(s.Way, c) {
					continue
				}
				if real {
					wg.Go(func() { got[j] = s.run(t, key, c.steps(key)) })
				} else {
					got[j] = s.run(t, key, c.steps(key))
				}
			}
			wg.Wait()
			steps := c.steps(key)
			for j, s := range sides {
				if !skipped(s.Way, c) {
					check(t, s, c, steps, got[j])
				}
			}
		})
	}
}

// check holds got, s's answers to the steps of c, to the case's: each to
// its step's answer, as s's way gives it; or, when s's way lacks what c
// needs, to none of them.
func check(t *testing.T, s *Side, c Case, steps []step, got []answer) {
	t.Helper()
	if lacks(s.Way, c) {
		disagrees := false
		for n, st := range steps {
			disagrees = disagrees || !reflect.DeepEqual(Want(s.Way, st.op, st.want), got[n])
		}
		assert.True(t, disagrees, "%s: the case needs %v, which Lacks says the %s way lacks, and passes: update the table",
			s.Name, needs(c), s.Way)
		return
	}
	for n, st := range steps {
		if want := Want(s.Way, st.op, st.want); !reflect.DeepEqual(want, got[n]) {
			t.Errorf("%s: %s: want %v, got %v", s.Name, describe(n, st), want, got[n])
		}
	}
}

// describe names step n of a case in failure messages.
func describe(n int, st step) string {
	switch {
	case st.op != nil:
		return fmt.Sprintf("step %d, %s", n, st.op.Name())
	case st.listen:
		return fmt.Sprintf("step %d, listen", n)
	case st.wake != "":
		return fmt.Sprintf("step %d, wake %s", n, st.wake)
	}
	return fmt.Sprintf("step %d, %v pass", n, st.wait)
}

// Refuses checks that n, spoken to in way w, refuses at once every
// operation of each kind of lock w lacks, as misconfigured, naming
// scripting.
func Refuses(t *testing.T, n node.Node, w node.Way) {
	t.Helper()
	k := "needs-scripts"
	for _, kind := range Lacks[w] {
		if kindOps[kind] == nil {
			continue
		}
		for _, op := range kindOps[kind](k) {
			rep := call(n, op)
			require.Error(t, rep.Err, op.Name())
			assert.ErrorIs(t, rep.Err, node.ErrNoScripts, op.Name())
			assert.ErrorIs(t, rep.Err, node.ErrMisconfigured, op.Name())
			assert.Contains(t, rep.Err.Error(), "+@scripting", op.Name())
		}
	}
}

// String shows what a is beyond the zero answer (a refusal), for failures.
func (a answer) String() string {
	var parts []string
	v := reflect.ValueOf(a)
	for i := range v.NumField() {
		if f := v.Field(i); !f.IsZero() {
			parts = append(parts, fmt.Sprintf("%s:%v", v.Type().Field(i).Name, f.Interface()))
		}
	}
	if len(parts) == 0 {
		return "{refused}"
	}
	return "{" + strings.Join(parts, " ") + "}"
}
