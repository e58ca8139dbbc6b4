package node_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

// The fake checked against the scripts: every case (lockCases, multiCases,
// semCases, rwCases, operatorCases) runs on a nodetest fake and on
// node.NewRedis over miniredis, which runs the Lua scripts themselves. Each side must give the answers the case expects,
// and the two sides the same answers, so that a change to the fake or to a
// script that the other lacks fails here. Where they disagree, the scripts
// are right: the fake is fixed to answer as they do.
//
// Not compared, because one side cannot express it:
//   - the restart delay (MinUptime): the guard reads uptime_in_seconds from
//     INFO server, a section miniredis does not have (it answers an error,
//     and a script's redis.call fails with it), so the scripts cannot be
//     run with it there. The fake's delay is tested through the facade
//     (redlock's TestRestartDelayRefusesRecentNodes), the scripts' against
//     real Redis (integration/faults_test.go, integration/rwmutex_test.go).
//   - the faults the fake injects (Err, Lose, Resend, Hang, Delay, Acked):
//     miniredis has no such faults; they stand for the network, not for a
//     script's answer.
//   - Released.Server: see answerOf.

// step is one thing a case does to a node: send op, or (op nil) let wait
// pass on the node's clock, or subscribe to the name's release channel.
type step struct {
	op     node.Op
	wait   time.Duration
	listen bool
	wake   string // subscribe to this process's wake channel
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
	// node.Released
	Gone, Named bool
	Heard       int
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
// the fake's clock runs while the test does, miniredis' is set by hand.
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
		// Server, the run id that a release finding its key gone reports,
		// is not compared: the fake answers its name (or IDs), and
		// miniredis has no INFO server section, so the scripts' server()
		// answers "" there. What is compared is Gone, which is what tells
		// the caller to look at Server at all.
		a.Gone, a.Named, a.Heard = v.Gone, v.Named, v.Heard
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

// side is one of the two nodes a case runs on.
type side struct {
	name string
	n    node.Node
	// pass lets d pass on the node's clock.
	pass func(d time.Duration)
	// listening waits until the node counts a subscriber on channel.
	listening func(t *testing.T, channel string)
}

// fakeSide is a nodetest fake; its clock is aged rather than waited for.
func fakeSide() *side {
	f := nodetest.New("fake")
	return &side{name: "fake", n: f, pass: f.Age, listening: func(*testing.T, string) {}}
}

// scriptSide is node.NewRedis over a miniredis server, whose clock (TIME,
// which the semaphore's and the readers' scripts read) is set by hand, and
// whose TTLs are fast-forwarded with it.
func scriptSide(t *testing.T) *side { t.Helper(); return waySide(t, node.Scripts) }

// waySide is node.NewRedis over a miniredis server, spoken to in way w.
func waySide(t *testing.T, w node.Way) *side {
	t.Helper()
	servers, clients := nodetest.Miniredis(t, 1)
	s, n := servers[0], node.NewRedis(clients[0])
	n.SetWay(w)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	now := time.Now()
	s.SetTime(now)
	return &side{name: w.String(), n: n,
		pass: func(d time.Duration) {
			now = now.Add(d)
			s.SetTime(now)
			s.FastForward(d)
		},
		listening: func(t *testing.T, channel string) {
			t.Helper()
			subscribed(t, s, channel)
		},
	}
}

// subscribed waits until s counts a subscriber on channel: SUBSCRIBE
// returns before the server applied it.
func subscribed(t *testing.T, s *miniredis.Miniredis, channel string) {
	t.Helper()
	require.Eventually(t, func() bool { return s.PubSubNumSub(channel)[channel] > 0 },
		time.Second, time.Millisecond, "subscribed to %s", channel)
}

// run runs steps on s and returns the answers of the whole sequence.
func (s *side) run(t *testing.T, key string, steps []step) []answer {
	t.Helper()
	out := make([]answer, len(steps))
	for i, st := range steps {
		switch {
		case st.op != nil:
			out[i] = answerOf(callOne(s.n, st.op))
		case st.listen || st.wake != "":
			channel := node.ReleaseChannel(key)
			if st.wake != "" {
				channel = node.WakeChannel(st.wake)
			}
			sub := s.n.Subscribe()
			t.Cleanup(func() { _ = sub.Close() })
			require.NoError(t, sub.Subscribe(context.Background(), channel))
			s.listening(t, channel)
		default:
			s.pass(st.wait)
		}
	}
	return out
}

// fakeCase is one sequence of steps on one fresh name.
type fakeCase struct {
	name  string
	steps func(k string) []step
}

func TestFakeAnswersAsScripts(t *testing.T) {
	sides := []*side{fakeSide(), scriptSide(t)}
	cases := slices.Concat(lockCases(), multiCases(), semCases(), rwCases(), operatorCases())
	compare(t, "fakecheck", sides, cases, func(_ *side, st step) answer { return st.want })
}

// compare runs every case on every side, each case on a fresh name (prefix
// and its index), and checks each side's answers against want's; sides
// that are held to the same answers must agree with the first.
func compare(t *testing.T, prefix string, sides []*side, cases []fakeCase, want func(s *side, st step) answer) {
	t.Helper()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := fmt.Sprintf("%s:%d", prefix, i)
			got := make([][]answer, len(sides))
			for j, s := range sides {
				got[j] = s.run(t, key, c.steps(key))
			}
			for n, st := range c.steps(key) {
				what := describe(n, st)
				for j, s := range sides {
					assert.Equal(t, want(s, st), got[j][n], "%s: %s", s.name, what)
				}
				if reflect.DeepEqual(want(sides[0], st), want(sides[len(sides)-1], st)) {
					assert.Equal(t, got[0][n], got[len(got)-1][n], "%s: %s (first) and %s (last) disagree", what, sides[0].name, sides[len(sides)-1].name)
				}
			}
		})
	}
}

// describe names step n of a case in failure messages.
func describe(n int, st step) string {
	switch {
	case st.op != nil:
		return fmt.Sprintf("step %d, %s", n, st.op.Name())
	case st.listen:
		return fmt.Sprintf("step %d, listen", n)
	}
	return fmt.Sprintf("step %d, %v pass", n, st.wait)
}
