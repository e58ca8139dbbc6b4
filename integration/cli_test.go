package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
)

// The redlock command, built and run as a user would, against five Redis
// containers.

// buildCLI builds cmd/redlock into a temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "redlock")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/redlock-go/redlock/cmd/redlock").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// cliRunner runs the built command with REDLOCK_NODES naming a cluster.
type cliRunner struct {
	bin, nodes string
}

func newCLI(t *testing.T, c *Cluster) cliRunner {
	t.Helper()
	urls := make([]string, c.Len())
	for i := range urls {
		urls[i] = "redis://" + c.Addr(i)
	}
	return cliRunner{bin: buildCLI(t), nodes: strings.Join(urls, ",")}
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a started redlock process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	code           int
	took           time.Duration
}

// start starts redlock with args; the test fails if it runs past a minute.
func (r cliRunner) start(t *testing.T, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	p := &proc{cmd: exec.CommandContext(ctx, r.bin, args...), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "REDLOCK_NODES="+r.nodes)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	start := time.Now()
	require.NoError(t, p.cmd.Start())
	go func() {
		defer cancel()
		defer close(p.done)
		err := p.cmd.Wait()
		p.took = time.Since(start)
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.code = exitCode(ee.ProcessState)
		default:
			p.code = -1
		}
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for the process and returns its exit status.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("redlock still running; stderr: %s", p.stderr.String())
	}
	return p.code
}

// run runs redlock with args to the end.
func (r cliRunner) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	p := r.start(t, args...)
	code = p.wait(t)
	return code, p.stdout.String(), p.stderr.String()
}

func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// waitFor waits until the process printed want on its standard output.
func (p *proc) waitFor(t *testing.T, want string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(p.stdout.String(), want) }, 20*time.Second, 10*time.Millisecond,
		"no %q; stdout %q, stderr %q", want, p.stdout.String(), p.stderr.String())
}

func TestCLI(t *testing.T) {
	c := startCluster(t, 5)
	cli := newCLI(t, c)
	nodes := inspector(t, c)

	t.Run("exit codes", func(t *testing.T) {
		code, _, stderr := cli.run(t, "run", "cli:codes", "--", "true")
		assert.Equal(t, 0, code, stderr)
		code, _, _ = cli.run(t, "run", "cli:codes", "--", "sh", "-c", "exit 3")
		assert.Equal(t, 3, code, "the command's own status")
		code, _, _ = cli.run(t, "run", "cli:codes", "--", "sh", "-c", "kill -USR1 $$")
		assert.Equal(t, 128+int(syscall.SIGUSR1), code, "128+N when signal N ended the command")
		code, _, stderr = cli.run(t, "run", "cli:codes", "--", "no-such-command-anywhere")
		assert.Equal(t, 127, code)
		assert.Contains(t, stderr, "not found")
		plain := filepath.Join(t.TempDir(), "not-executable")
		require.NoError(t, os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644))
		code, _, _ = cli.run(t, "run", "cli:codes", "--", plain)
		assert.Equal(t, 126, code)
		code, _, stderr = cli.run(t, "run", "cli:codes")
		assert.Equal(t, 64, code)
		assert.Contains(t, stderr, "no command")
		code, _, stderr = cli.run(t, "run", "--nodes", "http://"+c.Addr(0), "cli:codes", "--", "true")
		assert.Equal(t, 64, code)
		assert.Contains(t, stderr, "not a redis:// or rediss:// URL")
		assert.Equal(t, []string{"", "", "", "", ""}, values(t, nodes, "cli:codes"), "released everywhere")
	})

	t.Run("held elsewhere", func(t *testing.T) {
		rl := newRedlock(t, c)
		m := newMutex(t, rl, "cli:held", redlock.WithTTL(time.Minute))
		require.NoError(t, m.Lock(t.Context()))
		code, _, stderr := cli.run(t, "run", "cli:held", "--", "true")
		assert.Equal(t, 75, code)
		assert.Contains(t, stderr, `lock "cli:held" not acquired in one attempt: held elsewhere`)
		p := cli.start(t, "run", "--wait", "700ms", "cli:held", "--", "true")
		assert.Equal(t, 75, p.wait(t))
		assert.GreaterOrEqual(t, p.took, 700*time.Millisecond, "waited for --wait")
		assert.Contains(t, p.stderr.String(), "within 700ms")

		// Released while redlock waits: it takes the lock.
		p = cli.start(t, "run", "--wait", "20s", "cli:held", "--", "echo", "acquired")
		time.Sleep(300 * time.Millisecond)
		require.NoError(t, m.Unlock(t.Context()))
		assert.Equal(t, 0, p.wait(t), p.stderr.String())
		assert.Equal(t, "acquired\n", p.stdout.String())
	})

	t.Run("environment", func(t *testing.T) {
		script := `echo "$REDLOCK_NAME ${REDLOCK_FENCE-unset}"`
		code, out, stderr := cli.run(t, "run", "cli:env", "--", "sh", "-c", script)
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, "cli:env unset\n", out)
		code, out, stderr = cli.run(t, "run", "--fencing", "cli:env", "--", "sh", "-c", script)
		require.Equal(t, 0, code, stderr)
		first, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(out), "cli:env "), 10, 64)
		require.NoError(t, err, out)
		assert.Positive(t, first)
		code, out, _ = cli.run(t, "run", "--fencing", "cli:env", "--", "sh", "-c", script)
		require.Equal(t, 0, code)
		second, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(out), "cli:env "), 10, 64)
		require.NoError(t, err, out)
		assert.Greater(t, second, first, "each holder's token is greater")
	})

	t.Run("held while it runs, released everywhere after", func(t *testing.T) {
		p := cli.start(t, "run", "--ttl", "1s", "cli:hold", "--", "sh", "-c", "echo ready; sleep 1.5")
		p.waitFor(t, "ready")
		time.Sleep(time.Second) // past one TTL: renewed
		for i, v := range values(t, nodes, "cli:hold") {
			assert.NotEmpty(t, v, "node %d holds the renewed lock", i)
		}
		assert.Equal(t, 0, p.wait(t), p.stderr.String())
		assert.Equal(t, []string{"", "", "", "", ""}, values(t, nodes, "cli:hold"), "released on every node before exit")
	})

	t.Run("signals forwarded", func(t *testing.T) {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
			script := `trap 'echo "got $1"; exit 42' ` + strings.TrimPrefix(sigName(sig), "SIG") + `; echo ready; while :; do sleep 0.05; done`
			p := cli.start(t, "run", "cli:signals", "--", "sh", "-c", script, "sh", sigName(sig))
			p.waitFor(t, "ready")
			require.NoError(t, p.cmd.Process.Signal(sig))
			assert.Equal(t, 42, p.wait(t), "%v: the command's status; stderr %s", sig, p.stderr.String())
			assert.Contains(t, p.stdout.String(), "got "+sigName(sig))
		}
		assert.Equal(t, []string{"", "", "", "", ""}, values(t, nodes, "cli:signals"))
	})

	t.Run("signal ends the wait", func(t *testing.T) {
		rl := newRedlock(t, c)
		m := newMutex(t, rl, "cli:waitsig", redlock.WithTTL(time.Minute))
		require.NoError(t, m.Lock(t.Context()))
		p := cli.start(t, "run", "--wait", "30s", "cli:waitsig", "--", "echo", "ran")
		time.Sleep(500 * time.Millisecond)
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		assert.Equal(t, 128+int(syscall.SIGTERM), p.wait(t))
		assert.Less(t, p.took, 5*time.Second)
		assert.Empty(t, p.stdout.String(), "the command never ran")
	})

	t.Run("lost: SIGTERM, exit 70", func(t *testing.T) {
		script := `trap 'echo "got TERM"; exit 0' TERM; echo ready; while :; do sleep 0.05; done`
		p := cli.start(t, "run", "--ttl", "1s", "cli:lost", "--", "sh", "-c", script)
		p.waitFor(t, "ready")
		for _, n := range nodes {
			require.NoError(t, n.Del(t.Context(), "cli:lost").Err())
		}
		assert.Equal(t, 70, p.wait(t), p.stderr.String())
		assert.Contains(t, p.stdout.String(), "got TERM")
		assert.Contains(t, p.stderr.String(), `lock "cli:lost" lost`)
	})

	t.Run("lost: SIGKILL when the validity ends", func(t *testing.T) {
		script := `trap '' TERM; echo ready; while :; do sleep 0.05; done`
		p := cli.start(t, "run", "--ttl", "2s", "cli:lostkill", "--", "sh", "-c", script)
		p.waitFor(t, "ready")
		deleted := time.Now()
		for _, n := range nodes {
			require.NoError(t, n.Del(t.Context(), "cli:lostkill").Err())
		}
		assert.Equal(t, 70, p.wait(t), p.stderr.String())
		assert.Less(t, time.Since(deleted), 3*time.Second, "killed by the end of the last validity")
		assert.Contains(t, p.stderr.String(), "SIGKILL")
	})

	t.Run("forced unlock", func(t *testing.T) {
		holder := cli.start(t, "run", "--ttl", "1s", "--fencing", "cli:force", "--", "sh", "-c",
			`trap 'echo "got TERM"; exit 0' TERM; echo "fence $REDLOCK_FENCE"; while :; do sleep 0.05; done`)
		holder.waitFor(t, "fence ")
		fences := values(t, nodes, "cli:force:redlock:fence")
		waiter := cli.start(t, "run", "--wait", "20s", "--fencing", "cli:force", "--", "sh", "-c", `echo "fence $REDLOCK_FENCE"`)
		time.Sleep(300 * time.Millisecond)
		assert.Empty(t, waiter.stdout.String(), "the waiter waits")

		code, out, stderr := cli.run(t, "unlock", "--force", "cli:force")
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, 5, strings.Count(out, "deleted  holder "), out)
		assert.Contains(t, out, "cli:force: deleted on 5 of 5 nodes; fencing counters kept")

		assert.Equal(t, 0, waiter.wait(t), waiter.stderr.String())
		assert.Less(t, waiter.took, 5*time.Second)
		holderFence, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.Split(holder.stdout.String(), "\n")[0], "fence ")))
		require.NoError(t, err)
		waiterFence, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(waiter.stdout.String(), "fence ")))
		require.NoError(t, err)
		assert.Greater(t, waiterFence, holderFence, "the counter was kept: the next token is greater")
		for i, f := range fences {
			assert.Equal(t, strconv.Itoa(holderFence), f, "node %d: the counter before the forced unlock", i)
		}

		// The holder notices at its next renewal: SIGTERM, exit 70.
		assert.Equal(t, 70, holder.wait(t), holder.stderr.String())
		assert.Contains(t, holder.stdout.String(), "got TERM")

		code, out, _ = cli.run(t, "unlock", "--force", "cli:force")
		require.Equal(t, 0, code)
		assert.Contains(t, out, "deleted on 0 of 5 nodes")
		assert.Equal(t, 5, strings.Count(out, "not held"))
	})

	t.Run("forced unlock found at exit", func(t *testing.T) {
		// No renewal before the command ends: the check at exit finds it.
		holder := cli.start(t, "run", "--ttl", "30s", "cli:force2", "--", "sh", "-c", "echo ready; sleep 1")
		holder.waitFor(t, "ready")
		code, _, stderr := cli.run(t, "unlock", "--force", "cli:force2")
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, 70, holder.wait(t))
		assert.Contains(t, holder.stderr.String(), `lock "cli:force2" was lost while the command ran`)
	})

	t.Run("forced unlock wakes a waiter", func(t *testing.T) {
		rl := newRedlock(t, c)
		holder := newMutex(t, rl, "cli:wake", redlock.WithTTL(time.Minute))
		require.NoError(t, holder.Lock(t.Context()))
		// Polling once every 30s: only the announcement can wake it soon.
		other := newRedlock(t, c, redlock.WithRetryDelay(30*time.Second, 30*time.Second))
		waiter := newMutex(t, other, "cli:wake")
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(t.Context()) }()
		awaitQueued(t, t.Context(), inspector(t, c), "cli:wake")
		code, _, stderr := cli.run(t, "unlock", "--force", "cli:wake")
		require.Equal(t, 0, code, stderr)
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter did not wake")
		}
		require.NoError(t, waiter.Unlock(t.Context()))
	})

	t.Run("status", func(t *testing.T) {
		code, out, stderr := cli.run(t, "status", "cli:status")
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, 5, strings.Count(out, "  free  "), out)
		assert.Contains(t, out, "cli:status: held on 0 of 5 nodes (quorum 3): free")

		rl := newRedlock(t, c)
		m := newMutex(t, rl, "cli:status", redlock.WithTTL(time.Minute), redlock.WithFencing())
		require.NoError(t, m.Lock(t.Context()))
		time.Sleep(100 * time.Millisecond) // every node answered
		code, out, _ = cli.run(t, "status", "cli:status")
		require.Equal(t, 0, code)
		t.Logf("redlock status cli:status:\n%s", out)
		assert.Equal(t, 5, strings.Count(out, "  held  ttl "), out)
		assert.Equal(t, 5, strings.Count(out, "fence "+strconv.FormatUint(m.Fence(), 10)), out)
		assert.Contains(t, out, "cli:status: held on 5 of 5 nodes (quorum 3): locked by ")
		require.NoError(t, m.Unlock(t.Context()))
	})
}

func sigName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return s.String()
}

func TestCLIStatusNodeDown(t *testing.T) {
	c := startCluster(t, 5)
	cli := newCLI(t, c)
	rl := newRedlock(t, c)
	m := newMutex(t, rl, "cli:down", redlock.WithTTL(time.Minute), redlock.WithFencing())
	require.NoError(t, m.Lock(t.Context()))
	time.Sleep(100 * time.Millisecond) // every node answered
	require.NoError(t, c.Stop(t.Context(), 1))

	code, out, stderr := cli.run(t, "status", "cli:down")
	require.Equal(t, 0, code, stderr)
	t.Logf("redlock status cli:down:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6, out)
	assert.Regexp(t, `^127\.0\.0\.1:\d+\s+unreachable\s+\S`, lines[1])
	for _, i := range []int{0, 2, 3, 4} {
		assert.Regexp(t, `^`+c.Addr(i)+`\s+held\s+ttl \S+\s+holder [0-9a-f-]{8}\s+fence 1$`, lines[i])
	}
	assert.Equal(t, "cli:down: held on 4 of 5 nodes (quorum 3): locked by "+lines[0][strings.Index(lines[0], "holder ")+7:][:8], lines[5])

	code, out, _ = cli.run(t, "status", "--json", "cli:down")
	require.Equal(t, 0, code)
	var st struct {
		Name   string `json:"name"`
		Locked bool   `json:"locked"`
		Held   int    `json:"held"`
		Quorum int    `json:"quorum"`
		Nodes  []struct {
			Addr, State, Holder, Error string
			TTL                        int64  `json:"ttl_ms"`
			Fence                      uint64 `json:"fence"`
		} `json:"nodes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	assert.Equal(t, "cli:down", st.Name)
	assert.True(t, st.Locked)
	assert.Equal(t, 4, st.Held)
	assert.Equal(t, 3, st.Quorum)
	require.Len(t, st.Nodes, 5)
	assert.Equal(t, "unreachable", st.Nodes[1].State)
	assert.NotEmpty(t, st.Nodes[1].Error)
	for _, i := range []int{0, 2, 3, 4} {
		assert.Equal(t, "held", st.Nodes[i].State)
		assert.Equal(t, c.Addr(i), st.Nodes[i].Addr)
		assert.Greater(t, st.Nodes[i].TTL, int64(50_000))
		assert.Len(t, st.Nodes[i].Holder, 8)
		assert.Equal(t, uint64(1), st.Nodes[i].Fence)
	}

	// A forced unlock with a node down: exit 0, the node reported.
	code, out, _ = cli.run(t, "unlock", "--force", "cli:down")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "cli:down: deleted on 4 of 5 nodes; 1 unreachable")
	assert.Equal(t, 1, strings.Count(out, "unreachable  "), out)
}
