package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	valkey "github.com/valkey-io/valkey-go"

	rlnode "github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/conformance"
	rlgoredis "github.com/redlock-go/redlock/internal/node/goredis"
	"github.com/redlock-go/redlock/internal/node/rueidiswire"
	"github.com/redlock-go/redlock/internal/node/valkeywire"
)

// matrixConformance runs the node protocol's cases (package conformance)
// on a real server of s's kind, each way of speaking to it on a server of
// its own: scripts on the first (and each way again with extensions
// together, see conformance.Together), transactions on the second, and the
// server's own commands on the third where it has them (DELIFEQ or DELEX;
// a server with SET IFEQ alone releases as transactions do, and is held to
// their row of the table of ways). Every case, each way, the same answers
// as the unit tests hold miniredis and the fake to.
//
// It runs them over go-redis clients, then over rueidis and valkey-go
// clients (packages rueidiswire and valkeywire, what redlockrueidis and
// redlockvalkey build on), each a transport of the same commands.
func matrixConformance(t *testing.T, s *Servers, row serverRow) {
	t.Helper()
	require.GreaterOrEqual(t, s.Len(), 3)
	for _, client := range append([]string{"go-redis"}, otherClients...) {
		t.Run(client, func(t *testing.T) {
			side := func(i int, way, as rlnode.Way) *conformance.Side {
				if client != "go-redis" {
					return otherSide(t, client, s, i, way, as)
				}
				return realSide(t, s, i, way, as)
			}
			sides := []*conformance.Side{side(0, rlnode.Scripts, rlnode.Scripts), side(1, rlnode.Transactions, rlnode.Transactions)}
			native := rlnode.Transactions
			if row.cmds.delIfEq || row.cmds.delEx {
				native = rlnode.Native
			}
			if row.cmds.setIfEq || native == rlnode.Native {
				sides = append(sides, side(2, rlnode.Native, native))
			}
			for _, side := range sides[1:] {
				conformance.Refuses(t, side.Node, side.Way)
			}
			conformance.Run(t, fmt.Sprintf("conformance:%s:%d", client, time.Now().UnixNano()), sides, conformance.Cases())
			// Each way again, each plain extension sent as one of three
			// in one request (renewal's node.Extensions).
			together := []*conformance.Side{
				conformance.Together(side(0, rlnode.Scripts, rlnode.Scripts)),
				conformance.Together(side(1, rlnode.Transactions, rlnode.Transactions)),
			}
			if len(sides) > 2 {
				together = append(together, conformance.Together(side(2, rlnode.Native, native)))
			}
			conformance.Run(t, fmt.Sprintf("conformance:together:%s:%d", client, time.Now().UnixNano()), together, conformance.Cases())
		})
	}
}

// conformanceWithoutLua runs the cases on a node left to find by itself
// that its server has no Lua engine: it switches, on its first refused
// script, to the way its row names, and answers as that way's row of the
// table of ways says.
func conformanceWithoutLua(t *testing.T, s *Servers, row serverRow) {
	t.Helper()
	as := rlnode.Transactions
	if row.cmds.delIfEq || row.cmds.delEx {
		as = rlnode.Native
	}
	side := realSide(t, s, 0, rlnode.Scripts, as)
	side.Name = "without Lua on " + s.Launcher().Name
	conformance.Refuses(t, side.Node, as)
	conformance.Run(t, fmt.Sprintf("conformance:nolua:%d", time.Now().UnixNano()), []*conformance.Side{side}, conformance.Cases())
	// Again with each plain extension one of three in a request
	// (node.Extensions), on a node already switched off scripts: each
	// goes as its own call (a request refused its script first is
	// internal/node's TestExtensionsRefusedScriptsGoEachAlone).
	side = realSide(t, s, 1, rlnode.Scripts, as)
	side.Name = "without Lua on " + s.Launcher().Name
	conformance.Refuses(t, side.Node, as)
	conformance.Run(t, fmt.Sprintf("conformance:nolua-together:%d", time.Now().UnixNano()), []*conformance.Side{conformance.Together(side)}, conformance.Cases())
}

// realSide is node i of s spoken to in way, held to the table of ways'
// row as.
func realSide(t *testing.T, s *Servers, i int, way, as rlnode.Way) *conformance.Side {
	t.Helper()
	return sideOf(t, s, i, rlgoredis.NewNode(redis.NewClient(&redis.Options{Addr: s.Addr(i)})), way, as)
}

// otherSide is realSide over a client of another kind: rueidis or
// valkey-go.
func otherSide(t *testing.T, client string, s *Servers, i int, way, as rlnode.Way) *conformance.Side {
	t.Helper()
	var n *rlnode.Redis
	switch client {
	case "rueidis":
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr(i)}})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		n = rueidiswire.NewNode(c, rlnode.Config{})
	case "valkey-go":
		c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{s.Addr(i)}})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		n = valkeywire.NewNode(c, rlnode.Config{})
	default:
		t.Fatalf("no client %q", client)
	}
	side := sideOf(t, s, i, n, way, as)
	side.Name = client + ", " + side.Name
	return side
}

// sideOf is node n, of server i of s, spoken to in way, held to the table
// of ways' row as.
func sideOf(t *testing.T, s *Servers, i int, n *rlnode.Redis, way, as rlnode.Way) *conformance.Side {
	t.Helper()
	n.SetWay(way)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	admin := redis.NewClient(&redis.Options{Addr: s.Addr(i)})
	t.Cleanup(func() { _ = admin.Close() })
	return &conformance.Side{
		Name: fmt.Sprintf("%s on %s", way, s.Launcher().Name), Way: as, Node: n, Real: true,
		Pass: time.Sleep,
		Listening: func(t *testing.T, channel string) {
			t.Helper()
			require.Eventually(t, func() bool {
				return admin.PubSubNumSub(context.Background(), channel).Val()[channel] > 0
			}, 5*time.Second, 5*time.Millisecond, "subscribed to %s", channel)
		},
	}
}
