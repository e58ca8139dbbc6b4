package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	rlnode "github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/conformance"
	rlgoredis "github.com/redlock-go/redlock/internal/node/goredis"
)

// matrixConformance runs the node protocol's cases (package conformance)
// on a real server of s's kind, each way of speaking to it on a server of
// its own: scripts on the first, transactions on the second, and the
// server's own commands on the third where it has them (DELIFEQ or DELEX;
// a server with SET IFEQ alone releases as transactions do, and is held to
// their row of the table of ways). Every case, each way, the same answers
// as the unit tests hold miniredis and the fake to.
func matrixConformance(t *testing.T, s *Servers, row serverRow) {
	t.Helper()
	require.GreaterOrEqual(t, s.Len(), 3)
	sides := []*conformance.Side{
		realSide(t, s, 0, rlnode.Scripts, rlnode.Scripts),
		realSide(t, s, 1, rlnode.Transactions, rlnode.Transactions),
	}
	native := rlnode.Transactions
	if row.cmds.delIfEq || row.cmds.delEx {
		native = rlnode.Native
	}
	if row.cmds.setIfEq || native == rlnode.Native {
		sides = append(sides, realSide(t, s, 2, rlnode.Native, native))
	}
	for _, side := range sides[1:] {
		conformance.Refuses(t, side.Node, side.Way)
	}
	conformance.Run(t, fmt.Sprintf("conformance:%d", time.Now().UnixNano()), sides, conformance.Cases())
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
}

// realSide is node i of s spoken to in way, held to the table of ways'
// row as.
func realSide(t *testing.T, s *Servers, i int, way, as rlnode.Way) *conformance.Side {
	t.Helper()
	n := rlgoredis.NewNode(redis.NewClient(&redis.Options{Addr: s.Addr(i)}))
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
