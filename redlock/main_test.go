package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newFakeRedlock returns a Redlock over n fresh fake nodes, closed (and so
// waited for) when the test ends.
func newFakeRedlock(t *testing.T, n int, opts ...Option) (*Redlock, []*nodetest.Fake) {
	t.Helper()
	fs := nodetest.Fakes(n)
	r, err := newRedlock(nodetest.Nodes(fs), opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, f := range fs { // let hung calls finish so Close can return
			f.Unhang()
		}
		require.NoError(t, r.Close(context.Background()))
	})
	return r, fs
}

func newFakeMutex(t *testing.T, r *Redlock, name string, opts ...LockOption) *Mutex {
	t.Helper()
	m, err := r.NewMutex(name, opts...)
	require.NoError(t, err)
	return m
}

// tokenOf returns the token of m's current acquisition, "" when none.
func tokenOf(m *Mutex) string {
	if l := m.h.Current(); l != nil {
		return l.Token
	}
	return ""
}

// callOne sends op to n and waits for the reply, for tests of one node.
func callOne(n node.Node, op node.Op) node.Reply {
	ch := make(chan node.Reply, 1)
	n.Do(context.Background(), time.Now().Add(time.Minute), op, func(r node.Reply) { ch <- r })
	return <-ch
}
