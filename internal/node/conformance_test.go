package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	valkey "github.com/valkey-io/valkey-go"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/conformance"
	"github.com/redlock-go/redlock/internal/node/goredis"
	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/internal/node/rueidiswire"
	"github.com/redlock-go/redlock/internal/node/valkeywire"
)

// Every way, and the fake, checked against the cases (package
// conformance): the fake, which the layers above run their unit tests on,
// and goredis.NewNode over miniredis spoken to with scripts (the Lua scripts
// themselves), with transactions and with the server's DELEX (miniredis
// speaks DELEX ... IFEQ). Where the fake and the scripts disagree, the
// scripts are right: the fake is fixed to answer as they do. The same
// cases run on every server of the matrix in integration's
// TestServerMatrix.
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
func TestWaysAnswerAsTheCases(t *testing.T) {
	sides := []*conformance.Side{
		fakeSide(false), waySide(t, node.Scripts), fakeSide(true),
		waySide(t, node.Transactions), waySide(t, node.Native),
		conformance.Together(waySide(t, node.Scripts)), conformance.Together(fakeSide(false)),
		conformance.Together(waySide(t, node.Transactions)), conformance.Together(waySide(t, node.Native)),
	}
	conformance.Run(t, "conformance", sides, conformance.Cases())
}

// TestOtherTransportsAnswerAsTheCases runs the cases over the rueidis and
// valkey-go transports (packages rueidiswire and valkeywire) on miniredis,
// each way (and with extensions together): the same commands, read from
// other clients' replies, give the same answers.
func TestOtherTransportsAnswerAsTheCases(t *testing.T) {
	over := map[string]func(addr string) *node.Redis{
		"rueidis": func(addr string) *node.Redis {
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			return rueidiswire.NewNode(c, node.Config{})
		},
		"valkey-go": func(addr string) *node.Redis {
			c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			return valkeywire.NewNode(c, node.Config{})
		},
	}
	var sides []*conformance.Side
	for client, mk := range over {
		for _, w := range []node.Way{node.Scripts, node.Transactions, node.Native} {
			s := waySideOver(t, w, mk)
			s.Name = client + ", " + s.Name
			sides = append(sides, s)
		}
		for _, s := range []*conformance.Side{conformance.Together(waySideOver(t, node.Scripts, mk))} {
			s.Name = client + ", " + s.Name
			sides = append(sides, s)
		}
	}
	conformance.Run(t, "conformance", sides, conformance.Cases())
}

// fakeSide is a nodetest fake, refused scripts when noScripts; its clock
// is aged rather than waited for.
func fakeSide(noScripts bool) *conformance.Side {
	f := nodetest.New("fake")
	s := &conformance.Side{Name: "fake", Way: node.Scripts, Node: f, Pass: f.Age, Listening: func(*testing.T, string) {}}
	if noScripts {
		f.NoScripts = true
		s.Name, s.Way = "fake without scripts", node.Transactions
	}
	return s
}

// waySide is goredis.NewNode over a miniredis server, spoken to in way w,
// whose clock (TIME, which the semaphore's and the readers' scripts read)
// is set by hand, and whose TTLs are fast-forwarded with it.
func waySide(t *testing.T, w node.Way) *conformance.Side {
	t.Helper()
	servers, clients := goredistest.Miniredis(t, 1)
	return sideOn(t, servers[0], goredis.NewNode(clients[0]), w)
}

// waySideOver is waySide over the node over makes of a new miniredis
// server's address.
func waySideOver(t *testing.T, w node.Way, over func(addr string) *node.Redis) *conformance.Side {
	t.Helper()
	servers, _ := goredistest.Miniredis(t, 1)
	return sideOn(t, servers[0], over(servers[0].Addr()), w)
}

// sideOn is node n of miniredis server s, spoken to in way w.
func sideOn(t *testing.T, s *miniredis.Miniredis, n *node.Redis, w node.Way) *conformance.Side {
	t.Helper()
	n.SetWay(w)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	now := time.Now()
	s.SetTime(now)
	return &conformance.Side{Name: w.String(), Way: w, Node: n,
		Pass: func(d time.Duration) {
			now = now.Add(d)
			s.SetTime(now)
			s.FastForward(d)
		},
		Listening: func(t *testing.T, channel string) {
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
