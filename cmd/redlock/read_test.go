package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// `redlock run --read`: commands under read locks run together; a writer
// (a plain `redlock run`, or an RWMutex's write lock) waits for them, and
// they for it. status lists the readers.
func TestRunRead(t *testing.T) {
	servers, clients, urls := semNodes(t, 3)
	dir := t.TempDir()
	var stderr1, stderr2 bytes.Buffer
	done := make(chan int, 2)
	for i, stderr := range []*bytes.Buffer{&stderr1, &stderr2} {
		mark := filepath.Join(dir, string(rune('a'+i)))
		go func() {
			var stdout bytes.Buffer
			done <- cli([]string{"run", "--nodes", urls, "--read", "--ttl", "2s", "--wait", "10s", "catalog", "--",
				"sh", "-c", `touch "$1"; while [ ! -e "$2" ]; do sleep 0.05; done; [ "$REDLOCK_READ" = 1 ]`, "sh", mark, filepath.Join(dir, "stop")},
				env(nil), &stdout, stderr)
		}()
	}
	require.Eventually(t, func() bool {
		for _, m := range []string{"a", "b"} {
			if _, err := os.Stat(filepath.Join(dir, m)); err != nil {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "both readers run at once: %s %s", &stderr1, &stderr2)

	var stdout, stderr bytes.Buffer
	code := cli([]string{"run", "--nodes", urls, "catalog", "--", "true"}, env(nil), &stdout, &stderr)
	assert.Equal(t, exitTempFail, code, "a writer waits for the readers")

	stdout.Reset()
	require.Equal(t, exitOK, cli([]string{"status", "--nodes", urls, "--json", "catalog"}, env(nil), &stdout, &stderr))
	var st statusJSON
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &st))
	assert.Equal(t, report.KindReaders, st.Kind)
	assert.Equal(t, 2, st.PermitQuorum)
	assert.Len(t, st.Holders, 2)
	stdout.Reset()
	require.Equal(t, exitOK, cli([]string{"status", "--nodes", urls, "catalog"}, env(nil), &stdout, &stderr))
	assert.Contains(t, stdout.String(), "catalog: read-locked by 2 readers (quorum 2 of 3 nodes)")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "stop"), nil, 0o600))
	for range 2 {
		assert.Equal(t, exitOK, <-done, "%s %s", &stderr1, &stderr2)
	}
	for i, s := range servers {
		assert.False(t, s.Exists("catalog"), "released on node %d", i)
	}

	// A writer holds: a reader gets nothing in one attempt.
	rl, err := redlock.New(clients, redlock.WithNodeTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, rl.Close(context.Background())) })
	w, err := rl.NewRWMutex("catalog", redlock.WithTTL(time.Minute))
	require.NoError(t, err)
	require.NoError(t, w.Lock(t.Context()))
	stderr.Reset()
	code = cli([]string{"run", "--nodes", urls, "--read", "catalog", "--", "true"}, env(nil), &stdout, &stderr)
	assert.Equal(t, exitTempFail, code)
	assert.Contains(t, stderr.String(), `a read lock of "catalog" not acquired in one attempt: a writer holds it or waits for it`)
	require.NoError(t, w.Unlock(t.Context()))
}
