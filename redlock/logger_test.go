package redlock

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

// logBuffer is where a test's slog.Logger writes, one text line per
// record. Safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the lines logged that contain every one of parts.
func (b *logBuffer) lines(parts ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for line := range strings.Lines(b.buf.String()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// newLogger returns a logger of every level, writing to a buffer.
func newLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// refusable is a fake node whose client reports refused dials (as
// node.Redis does through its dial hook), apart from any call.
type refusable struct {
	*nodetest.Fake
	on func(error)
}

func (r *refusable) OnRefused(f func(error)) { r.on = f }

// refuse makes the node refuse connections, and its client tell of the
// first refusal.
func (r *refusable) refuse(t *testing.T) {
	t.Helper()
	r.Faults(func(n *nodetest.Fake) { n.Err = errRefused })
	require.NotNil(t, r.on, "the Redlock hears of refused dials")
	r.on(errRefused)
}

// newRefusableRedlock returns a Redlock over n refusable fakes.
func newRefusableRedlock(t *testing.T, n int, opts ...Option) (*Redlock, []*refusable) {
	t.Helper()
	fs := nodetest.Fakes(n)
	rs := make([]*refusable, n)
	nodes := make([]node.Node, n)
	for i, f := range fs {
		rs[i] = &refusable{Fake: f}
		nodes[i] = rs[i]
	}
	r, err := newRedlock(nodes, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, f := range fs {
			f.Unhang()
		}
		require.NoError(t, r.Close(context.Background()))
	})
	return r, rs
}

// A node whose client's dial was refused is down at once, before any call
// of the Redlock failed, and is sent nothing until a probe sees it answer;
// a release owed to it meanwhile reaches it then.
func TestRefusedDialPutsNodeDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newRefusableRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithTTL(time.Minute))
		require.NoError(t, m.Lock(t.Context()))
		synctest.Wait()
		_, held := fs[2].Get("k")
		require.True(t, held)

		fs[2].refuse(t)
		h := r.Health()[2]
		require.True(t, h.Down, "down at the first refused dial")
		assert.ErrorContains(t, h.Err, "connection refused")
		calls := fs[2].Count("release")
		require.NoError(t, m.Unlock(t.Context()), "nodes 0 and 1 release it")
		assert.Equal(t, calls, fs[2].Count("release"), "nothing is sent to a node known down")
		assert.Equal(t, 1, r.Health()[2].OwedReleases, "its release is owed")

		time.Sleep(time.Second) // still refused: probed, still owed
		assert.Equal(t, 1, r.Health()[2].OwedReleases)
		fs[2].Faults(func(n *nodetest.Fake) { n.Err = nil })
		time.Sleep(probeMax)
		synctest.Wait()
		assert.False(t, r.Health()[2].Down)
		_, held = fs[2].Get("k")
		assert.False(t, held, "the owed release was delivered once the node answered")
		assert.Zero(t, r.Health()[2].OwedReleases)
	})
}

// WithLogger logs one line per node going down and one per coming back,
// however many calls and probes failed meanwhile, one per audit finding
// above info, and one per lock lost; nothing per operation.
func TestLoggerTellsChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, logs := newLogger()
		r, fs := newRefusableRedlock(t, 3, WithLogger(l))
		evicting := safeFacts()
		evicting.Info["maxmemory"], evicting.Info["maxmemory_policy"] = "1000", "volatile-lru"
		fs[1].Faults(func(n *nodetest.Fake) { n.Facts = &evicting })
		m := newFakeMutex(t, r, "k", WithTTL(300*time.Millisecond))
		for range 5 {
			require.NoError(t, m.Lock(t.Context()))
			require.NoError(t, m.Unlock(t.Context()))
		}
		assert.Empty(t, logs.lines("node"), "nothing per operation")

		fs[2].refuse(t)
		for range 5 { // each fails on node 2 (skipped), and the probes fail
			require.NoError(t, m.Lock(t.Context()))
			require.NoError(t, m.Unlock(t.Context()))
			time.Sleep(300 * time.Millisecond)
		}
		synctest.Wait()
		down := logs.lines("redlock: node down", "node=2")
		require.Len(t, down, 1, "%v", down)
		assert.Contains(t, down[0], "level=WARN")
		assert.Contains(t, down[0], "addr=fake2")
		assert.Contains(t, down[0], "connection refused")
		found := logs.lines("redlock: audit finding")
		require.Len(t, found, 1, "the audit a second after the first acquisition: %v", found)
		assert.Contains(t, found[0], "level=ERROR")
		assert.Contains(t, found[0], "node=1")
		assert.Contains(t, found[0], "code=eviction")

		fs[2].Faults(func(n *nodetest.Fake) { n.Err = nil })
		time.Sleep(probeMax)
		synctest.Wait()
		back := logs.lines("redlock: node back", "node=2")
		require.Len(t, back, 1, "%v", back)
		assert.Contains(t, back[0], "level=INFO")

		// A lock whose renewal no node answers is lost.
		lost := newFakeMutex(t, r, "lost", WithTTL(300*time.Millisecond), WithRenewal())
		require.NoError(t, lost.Lock(t.Context()))
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Err = errRefused })
		}
		<-lost.Done()
		synctest.Wait()
		gone := logs.lines("redlock: lock lost")
		require.Len(t, gone, 1, "%v", gone)
		assert.Contains(t, gone[0], "level=ERROR")
		assert.Contains(t, gone[0], "name=lost")
		for i := range 3 {
			assert.Len(t, logs.lines("redlock: node down", "node="+strconv.Itoa(i)), map[int]int{0: 1, 1: 1, 2: 2}[i], "node %d", i)
		}
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Err = nil })
		}
	})
}

// goRedisLog is a go-redis logger that keeps the lines about one address.
type goRedisLog struct {
	addr  string
	mu    sync.Mutex
	lines []string
}

func (g *goRedisLog) Printf(_ context.Context, format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if !strings.Contains(line, g.addr) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lines = append(g.lines, line)
}

func (g *goRedisLog) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.lines)
}

// With a real client, the first dial the host refuses puts its node down
// (go-redis hands the refusal to the call only after its retries), and
// the library then sends it nothing: a Do of two seconds, renewing every
// 200 ms, makes go-redis log no more than the two calls that met the
// refusal on their way (the lock's first request and identification).
// Not parallel: the go-redis logger is global.
func TestRefusedDialQuiet(t *testing.T) {
	_, clients := goredistest.Miniredis(t, 2)
	addr := nodetest.RefusedAddr(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	logs := &goRedisLog{addr: addr}
	redis.SetLogger(logs)
	t.Cleanup(func() { redis.SetLogger(stderrLogger{}) })
	l, lines := newLogger()
	r, err := New(append(clients, c), WithLogger(l))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
	err = r.Do(t.Context(), "quiet", func(context.Context) error {
		assert.Eventually(t, func() bool { return r.Health()[2].Down }, 50*time.Millisecond, time.Millisecond,
			"down right after the first refused dial")
		time.Sleep(2 * time.Second)
		return nil
	}, WithTTL(600*time.Millisecond))
	require.NoError(t, err)
	h := r.Health()[2]
	require.True(t, h.Down)
	assert.ErrorContains(t, h.Err, "connection refused")
	time.Sleep(500 * time.Millisecond) // the go-redis dials in flight end (5 tries, 100 ms apart)
	t.Logf("go-redis log lines about the refused address: %d", logs.count())
	assert.LessOrEqual(t, logs.count(), 2, "%v", logs.lines)
	assert.Len(t, lines.lines("redlock: node down"), 1)
}

// stderrLogger writes go-redis' lines to stderr, as its default does: put
// back after a test that captured them.
type stderrLogger struct{}

func (stderrLogger) Printf(_ context.Context, format string, v ...any) {
	fmt.Fprintf(os.Stderr, "redis: "+format+"\n", v...)
}

// A node whose host refused connections comes back once a server listens
// there: the probe connects quietly, which lets the calls through again,
// and the logger says so once.
func TestRefusedNodeComesBack(t *testing.T) {
	_, clients := goredistest.Miniredis(t, 2)
	addr := nodetest.RefusedAddr(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	l, lines := newLogger()
	r, err := New(append(clients, c), WithLogger(l))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
	m, err := r.NewMutex("back", WithTTL(time.Minute))
	require.NoError(t, err)
	require.NoError(t, m.Lock(t.Context()))
	require.Eventually(t, func() bool { return r.Health()[2].Down }, time.Second, time.Millisecond)
	require.NoError(t, m.Unlock(t.Context()))

	s := miniredis.NewMiniRedis()
	require.NoError(t, s.StartAddr(addr))
	t.Cleanup(s.Close)
	require.Eventually(t, func() bool { return !r.Health()[2].Down }, 5*time.Second, 5*time.Millisecond, "a probe sees it answer")
	require.NoError(t, m.Lock(t.Context()))
	assert.Eventually(t, func() bool { return s.Exists("back") }, time.Second, time.Millisecond, "the node is asked again")
	require.NoError(t, m.Unlock(t.Context()))
	assert.Len(t, lines.lines("redlock: node down", "node=2"), 1)
	assert.Len(t, lines.lines("redlock: node back", "node=2"), 1)
}
