package redlock

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newFakeRedlock returns a Redlock over n fresh fake nodes, closed (and so
// waited for) when the test ends.
func newFakeRedlock(t *testing.T, n int, opts ...Option) (*Redlock, []*fakeNode) {
	t.Helper()
	fs, ns := fakes(n)
	r, err := newRedlock(ns, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, f := range fs { // let hung calls finish so Close can return
			f.mu.Lock()
			if f.hang != nil {
				select {
				case <-f.hang:
				default:
					close(f.hang)
				}
			}
			f.mu.Unlock()
		}
		require.NoError(t, r.Close(context.Background()))
	})
	return r, fs
}

func newFakeMutex(t *testing.T, r *Redlock, name string, opts ...Option) *Mutex {
	t.Helper()
	m, err := r.NewMutex(name, opts...)
	require.NoError(t, err)
	return m
}
