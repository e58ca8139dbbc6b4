package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// `redlock run --permits` and `redlock status` of a semaphore, in this
// process, against in-process servers (miniredis runs the real scripts).
// integration/ runs the built command against real Redis.

// semNodes starts n servers and returns them, clients of each, and
// --nodes naming them.
func semNodes(t *testing.T, n int) ([]*miniredis.Miniredis, []redis.UniversalClient, string) {
	t.Helper()
	servers, clients := goredistest.Miniredis(t, n)
	urls := make([]string, n)
	for i, s := range servers {
		urls[i] = "redis://" + s.Addr()
	}
	return servers, clients, strings.Join(urls, ",")
}

// newSemaphore returns a Semaphore of name over clients, closed when the
// test ends.
func newSemaphore(t *testing.T, clients []redis.UniversalClient, name string, permits int) *redlock.Semaphore {
	t.Helper()
	rl, err := redlock.New(clients, redlock.WithNodeTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, rl.Close(context.Background())) })
	s, err := rl.NewSemaphore(name, permits, redlock.WithTTL(time.Minute))
	require.NoError(t, err)
	return s
}

func TestRunPermitsRenewsAndReleases(t *testing.T) {
	servers, _, urls := semNodes(t, 3)
	out := filepath.Join(t.TempDir(), "out")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	// A TTL of 2s and a command of 3s: only renewal keeps the permit
	// (without it, the command is stopped and redlock exits 70). --wait
	// lets an attempt that a loaded machine made too slow be tried again.
	code := cli([]string{"run", "--nodes", urls, "--permits", "2", "--ttl", "2s", "--wait", "10s", "jobs", "--",
		"sh", "-c", `sleep 3; echo "$REDLOCK_NAME $REDLOCK_PERMITS ${REDLOCK_FENCE-unset}" > ` + out}, env(nil), &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	assert.GreaterOrEqual(t, time.Since(start), 3*time.Second)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "jobs 2 unset\n", string(got))
	for i, s := range servers {
		assert.False(t, s.Exists("jobs"), "released on node %d", i)
	}
}

func TestRunPermitsBusyAndMisconfigured(t *testing.T) {
	_, clients, urls := semNodes(t, 3)
	held := newSemaphore(t, clients, "jobs", 1)
	require.NoError(t, held.TryAcquire(t.Context()))

	var stdout, stderr bytes.Buffer
	code := cli([]string{"run", "--nodes", urls, "--permits", "1", "jobs", "--", "true"}, env(nil), &stdout, &stderr)
	assert.Equal(t, exitTempFail, code)
	assert.Contains(t, stderr.String(), `a permit of semaphore "jobs" not acquired in one attempt: all 1 permits held elsewhere`)

	stderr.Reset()
	start := time.Now()
	code = cli([]string{"run", "--nodes", urls, "--permits", "1", "--wait", "300ms", "jobs", "--", "true"}, env(nil), &stdout, &stderr)
	assert.Equal(t, exitTempFail, code, stderr.String())
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "waited for --wait")
	assert.Contains(t, stderr.String(), "within 300ms")

	// Released while redlock waits: it takes the permit.
	done := make(chan int, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		done <- cli([]string{"run", "--nodes", urls, "--permits", "1", "--wait", "20s", "jobs", "--", "true"}, env(nil), &stdout, &stderr)
	}()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, held.Release(t.Context()))
	assert.Equal(t, exitOK, <-done)

	// Another count for the same name, or a lock's name: every node refuses.
	require.NoError(t, held.TryAcquire(t.Context()))
	stderr.Reset()
	code = cli([]string{"run", "--nodes", urls, "--permits", "3", "jobs", "--", "true"}, env(nil), &stdout, &stderr)
	assert.Equal(t, exitConfig, code, "a misconfiguration, not a busy semaphore")
	assert.Contains(t, stderr.String(), "has 1 permits on this node, this one asks for 3")
	require.NoError(t, held.Release(t.Context()))
	assert.Empty(t, stdout.String())
}

func TestRunPermitsLost(t *testing.T) {
	servers, _, urls := semNodes(t, 3)
	running := filepath.Join(t.TempDir(), "running")
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	start := time.Now()
	go func() {
		done <- cli([]string{"run", "--nodes", urls, "--permits", "2", "--ttl", "2s", "--wait", "10s", "jobs", "--",
			"sh", "-c", `touch "$1"; sleep 30`, "sh", running}, env(nil), &stdout, &stderr)
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(running); return err == nil }, 5*time.Second, time.Millisecond,
		"the command runs: %s", &stderr)
	// The default quorum for 2 permits on 3 nodes is all 3: a permit gone
	// from one node is lost for good, which the next renewal finds.
	servers[0].Del("jobs")
	select {
	case code := <-done:
		assert.Equal(t, exitSoftware, code)
	case <-time.After(10 * time.Second):
		t.Fatal("redlock did not stop the command")
	}
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Contains(t, stderr.String(), `a permit of semaphore "jobs" lost`)
	assert.Contains(t, stderr.String(), "stopping the command (SIGTERM)")
}

func TestStatusSemaphore(t *testing.T) {
	_, clients, urls := semNodes(t, 3)
	a := newSemaphore(t, clients, "jobs", 2)
	b := newSemaphore(t, clients, "jobs", 2)
	require.NoError(t, a.TryAcquire(t.Context()))
	require.NoError(t, b.TryAcquire(t.Context()))
	require.Eventually(t, func() bool {
		n, err := clients[2].ZCard(context.Background(), "jobs").Result()
		return err == nil && n == 2
	}, time.Second, time.Millisecond, "every node's grant")

	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, cli([]string{"status", "--nodes", urls, "jobs"}, env(nil), &stdout, &stderr), stderr.String())
	text := stdout.String()
	lines := strings.Split(strings.TrimSpace(text), "\n")
	require.Len(t, lines, 4, text)
	for _, l := range lines[:3] {
		assert.Contains(t, l, "held  2 of 2 permits", text)
		assert.Contains(t, l, " ttl ", text)
	}
	assert.Contains(t, lines[3], "jobs: semaphore of 2 permits, 2 held (quorum 3 of 3 nodes): ")
	assert.Contains(t, lines[3], " on 3")
	assert.Empty(t, stderr.String())

	stdout.Reset()
	require.Equal(t, exitOK, cli([]string{"status", "--json", "--nodes", urls, "jobs"}, env(nil), &stdout, &stderr))
	var got statusJSON
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &got))
	assert.Equal(t, report.KindSemaphore, got.Kind)
	assert.Equal(t, 2, got.Permits)
	assert.Equal(t, 3, got.PermitQuorum)
	assert.False(t, got.Locked)
	require.Len(t, got.Holders, 2)
	for _, h := range got.Holders {
		assert.Len(t, h.Holder, 8, "a prefix of the token only")
		assert.Equal(t, 3, h.Nodes)
		assert.True(t, h.Quorum)
	}
	for _, n := range got.Nodes {
		assert.Equal(t, "held", n.State)
		assert.Equal(t, report.KindSemaphore, n.Kind)
		assert.Equal(t, 2, n.Permits)
		require.Len(t, n.Holders, 2)
		assert.InDelta(t, time.Minute.Milliseconds(), n.Holders[0].TTLMillis, 5000)
	}
}
