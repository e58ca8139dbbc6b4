package integration

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nodeSet is what the tests' helpers need of a set of independent
// servers: the containers of a Cluster, or the processes of the server
// matrix's Servers.
type nodeSet interface {
	Len() int
	Addr(i int) string
	Clients(opts *redis.Options) []redis.UniversalClient
	Pause(ctx context.Context, i int) error
	Unpause(ctx context.Context, i int) error
	Kill(ctx context.Context, i int) error
}

var (
	_ nodeSet = (*Cluster)(nil)
	_ nodeSet = (*Servers)(nil)
)

// requireLaunchers returns the server matrix's launchers, failing the test
// (never skipping it) when make test did not name them.
func requireLaunchers(t *testing.T) []Launcher {
	t.Helper()
	ls, err := Launchers()
	require.NoError(t, err)
	return ls
}

// startServers starts n servers of l for one test and stops them after.
func startServers(tb testing.TB, l Launcher, n int) *Servers {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := StartServers(ctx, l, n)
	require.NoError(tb, err, "start %d %s servers", n, l.Name)
	tb.Cleanup(func() { require.NoError(tb, s.Close()) })
	return s
}

// alive reports whether a process with this pid exists (a zombie counts).
func alive(pid int) bool {
	return pid != 0 && !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// TestServersHarness checks the process harness on each launcher: the
// servers answer on their own loopback ports, a paused one is silent and
// answers again once resumed, a killed one refuses connections and its
// process is gone, and Close leaves no process behind; a server whose port
// was taken starts on another. Without
// REDLOCK_SERVERS, Launchers says to run make test.
func TestServersHarness(t *testing.T) {
	t.Run("without "+ServersEnv, func(t *testing.T) {
		t.Setenv(ServersEnv, "")
		_, err := Launchers()
		require.Error(t, err)
		assert.ErrorContains(t, err, "make test")
		assert.ErrorContains(t, err, "scripts/fetch-servers.sh")
	})
	launchers := requireLaunchers(t)
	t.Run("port taken", func(t *testing.T) {
		// The port freePorts found free is taken when the server starts:
		// it starts on another, and is not mistaken for the server there.
		taken := startServers(t, launchers[0], 1)
		s, err := startOn(timeout(t, time.Minute), launchers[0], []int{taken.ports[0]})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		assert.NotEqual(t, taken.Addr(0), s.Addr(0))
		info := inspector(t, s)[0].Info(t.Context(), "server").Val()
		assert.Equal(t, strconv.Itoa(s.Pid(0)), infoField(info, "process_id"))
	})
	for _, l := range launchers {
		t.Run(l.Name, func(t *testing.T) {
			ctx := timeout(t, time.Minute)
			s, err := StartServers(ctx, l, 2)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() }) // a second Close does nothing
			pids := []int{s.Pid(0), s.Pid(1)}
			require.NotEqual(t, s.Addr(0), s.Addr(1))
			admin := inspector(t, s)
			for i, a := range admin {
				require.NoError(t, a.Set(ctx, "k", i, 0).Err(), "server %d", i)
				assert.Equal(t, s.Addr(i), a.ClientInfo(ctx).Val().LAddr, "server %d listens where it was asked to", i)
			}
			assert.Equal(t, []string{"0", "1"}, values(t, admin, "k"), "two servers, not one")

			require.NoError(t, s.Pause(ctx, 1))
			quick := closeAfter(t, redis.NewClient(&redis.Options{Addr: s.Addr(1), MaxRetries: -1, ReadTimeout: 300 * time.Millisecond}))
			err = quick.Ping(ctx).Err()
			var ne net.Error
			require.ErrorAs(t, err, &ne, "a paused server is silent")
			require.True(t, ne.Timeout(), "%v", err)
			require.NoError(t, s.Unpause(ctx, 1))
			require.NoError(t, admin[1].Ping(ctx).Err(), "answers once resumed")

			require.NoError(t, s.Kill(ctx, 0))
			assert.False(t, alive(pids[0]), "killed and reaped")
			assert.ErrorIs(t, admin[0].Ping(ctx).Err(), syscall.ECONNREFUSED)
			assert.Zero(t, s.Pid(0))

			require.NoError(t, s.Close())
			assert.False(t, alive(pids[1]), "Close kills and reaps")
			_, err = os.Stat(filepath.Dir(s.logPath(0)))
			assert.ErrorIs(t, err, os.ErrNotExist, "Close removes the servers' directory")
		})
	}
}
