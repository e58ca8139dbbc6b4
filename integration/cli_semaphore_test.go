package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCLISemaphore runs three copies of `redlock run --permits 2` at once
// against five Redis containers: at most two commands may run at a time,
// all three must run, and `redlock status` shows the two holders meanwhile.
//
// Each command records when it started and ended (wall clock, one machine)
// in a shared file; a sweep over those intervals finds the most that
// overlapped. A command runs inside its holder's permit, so more than two
// overlapping means three holders at once.
func TestCLISemaphore(t *testing.T) {
	const name, permits, copies = "cli:sem", "2", 3
	c := startCluster(t, 5)
	cli := newCLI(t, c)
	nodes := inspector(t, c)
	log := filepath.Join(t.TempDir(), "intervals")
	script := `echo running; s=$(date +%s%N); sleep 1.5; e=$(date +%s%N); echo "$s $e" >> "$1"`

	procs := make([]*proc, copies)
	for i := range procs {
		procs[i] = cli.start(t, "run", "--permits", permits, "--ttl", "2s", "--wait", "30s", name, "--", "sh", "-c", script, "sh", log)
	}
	require.Eventually(t, func() bool {
		running := 0
		for _, p := range procs {
			if strings.Contains(p.stdout.String(), "running") {
				running++
			}
		}
		return running >= 2
	}, 20*time.Second, 10*time.Millisecond, "two commands running; stderr %q %q %q",
		procs[0].stderr, procs[1].stderr, procs[2].stderr)

	code, out, stderr := cli.run(t, "status", name)
	require.Equal(t, 0, code, stderr)
	t.Logf("redlock status %s:\n%s", name, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6, out)
	// A holder needs 4 of the 5 nodes: one may have missed a grant (a
	// node timeout on a loaded machine). No node ever counts 3.
	for i, l := range lines[:5] {
		assert.Regexp(t, `^`+c.Addr(i)+`\s+(held\s+[12] of 2 permits\s+[0-9a-f-]{8} ttl \S+(, [0-9a-f-]{8} ttl \S+)?|free)$`, l)
	}
	assert.Regexp(t, `^cli:sem: semaphore of 2 permits, 2 held \(quorum 4 of 5 nodes\): [0-9a-f-]{8} on [45], [0-9a-f-]{8} on [45]`, lines[5])

	for i, p := range procs {
		assert.Equal(t, 0, p.wait(t), "copy %d: %s", i, p.stderr.String())
	}
	data, err := os.ReadFile(log)
	require.NoError(t, err)
	intervals := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, intervals, copies, "every copy ran its command once")
	most := mostOverlapping(t, intervals)
	assert.LessOrEqual(t, most, 2, "commands ran at once under 2 permits; intervals %q", intervals)
	assert.Equal(t, 2, most, "two commands did run at once")
	for i, n := range nodes {
		assert.Zero(t, n.Exists(t.Context(), name).Val(), "node %d: every permit released", i)
	}
}

// mostOverlapping returns the most of intervals ("start end" in ns) that
// were open at one time.
func mostOverlapping(t *testing.T, intervals []string) int {
	t.Helper()
	type event struct {
		at    int64
		delta int // +1 start, -1 end; an end sorts before a start at the same time
	}
	var events []event
	for _, iv := range intervals {
		f := strings.Fields(iv)
		require.Len(t, f, 2, iv)
		start, err := strconv.ParseInt(f[0], 10, 64)
		require.NoError(t, err, iv)
		end, err := strconv.ParseInt(f[1], 10, 64)
		require.NoError(t, err, iv)
		events = append(events, event{start, +1}, event{end, -1})
	}
	slices.SortFunc(events, func(a, b event) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.delta - b.delta
	})
	open, most := 0, 0
	for _, e := range events {
		open += e.delta
		most = max(most, open)
	}
	return most
}
