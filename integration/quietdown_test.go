package integration

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
)

// dialLog is a go-redis logger that keeps, per address, when each line
// about a dial mentioning it was written.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
	at    map[string][]time.Duration
	start time.Time
}

func (l *dialLog) Printf(_ context.Context, format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if !strings.Contains(line, "dial") {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.addrs {
		if strings.Contains(line, a) {
			l.at[a] = append(l.at[a], time.Since(l.start).Round(time.Millisecond))
		}
	}
}

// of returns when the lines about address a were written.
func (l *dialLog) of(a string) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.at[a]...)
}

// count returns how many lines of s contain every one of parts.
func count(s *syncBuffer, parts ...string) int {
	n := 0
	for line := range strings.Lines(s.String()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// Five nodes, two of them closed ports: one Do of five seconds, renewing
// its 2 s TTL, holds the lock on the three others. The closed ports are
// down from their first refused dial (Health, and one slog line each),
// and are sent nothing more while down, so go-redis logs at most one
// failed dial per closed port per second of the Do (a41c0ed: 46 lines, about
// 23 per port, and Health down only after the client's retries).
// Not parallel: the go-redis logger is global.
func TestClosedPortsQuiet(t *testing.T) {
	s := startServers(t, requireLaunchers(t)[0], 3)
	ports, err := freePorts(2)
	require.NoError(t, err)
	closed := []string{addr(ports[0]), addr(ports[1])}
	logs := &dialLog{addrs: closed, at: map[string][]time.Duration{}, start: time.Now()}
	redis.SetLogger(logs)
	t.Cleanup(func() { redis.SetLogger(stderrLogger{}) })
	out := &syncBuffer{}
	rl, err := redlock.New(clientsOf(t, nil, s.Addr(0), s.Addr(1), s.Addr(2), closed[0], closed[1]),
		redlock.WithLogger(slog.New(slog.NewTextHandler(out, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close(context.Background()) })

	const hold = 5 * time.Second
	var took time.Duration
	err = rl.Do(t.Context(), "quiet:closed", func(ctx context.Context) error {
		start := time.Now()
		// Lock returned at its quorum; the closed ports' first dials are
		// refused within a millisecond of its start.
		assert.Eventually(t, func() bool {
			h := rl.Health()
			return h[3].Down && h[4].Down
		}, 100*time.Millisecond, time.Millisecond, "down at the first refused dial")
		select {
		case <-time.After(hold - time.Since(start)):
		case <-ctx.Done():
		}
		took = time.Since(start)
		return ctx.Err()
	}, redlock.WithTTL(2*time.Second))
	require.NoError(t, err)
	require.GreaterOrEqual(t, took, hold)
	time.Sleep(time.Second) // a go-redis dial in flight logs when its 5 tries are over
	h := rl.Health()
	for i, a := range closed {
		lines := logs.of(a)
		t.Logf("node %d (%s): %d go-redis dial lines, at %v", 3+i, a, len(lines), lines)
		assert.LessOrEqual(t, len(lines), int(hold/time.Second), "at most one a second")
		assert.True(t, h[3+i].Down)
		assert.ErrorContains(t, h[3+i].Err, "connection refused")
		assert.Equal(t, 1, count(out, "redlock: node down", fmt.Sprintf("node=%d ", 3+i), "addr="+a), "told down once: %s", out)
	}
	assert.Equal(t, 2, count(out, "redlock: node down"), "only the closed ports")
	assert.Zero(t, count(out, "redlock: node back"))
}
