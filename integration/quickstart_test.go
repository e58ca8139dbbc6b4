package integration

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// quickStartPorts are the servers the README's quick start names.
var quickStartPorts = []int{6379, 6380, 6381}

// TestQuickStartAsPasted does what the README asks of a new user: every
// whole program in it (a ```go block that starts with `package main`) is
// pasted, as it stands, into an empty module that requires this checkout,
// and run against three fresh servers on the ports it names. It must exit
// 0, print what the README says it prints, and leave no key behind.
func TestQuickStartAsPasted(t *testing.T) {
	programs := wholePrograms(t, "../README.md")
	require.Len(t, programs, 1, "the README's quick start is one whole program")
	c := startCluster(t, len(quickStartPorts), WithPorts(quickStartPorts...))
	for _, src := range programs {
		out := runProgram(t, src)
		assert.Equal(t, "holding invoice:42\n", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range c.Len() {
		admin := redis.NewClient(&redis.Options{Addr: c.Addr(i)})
		keys, err := admin.Keys(ctx, "*").Result()
		_ = admin.Close()
		require.NoError(t, err)
		assert.Empty(t, keys, "node %d after the program", i)
	}
}

// wholePrograms returns the ```go blocks of a Markdown file that are whole
// programs, byte for byte as the file holds them.
func wholePrograms(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []string
	var cur *strings.Builder
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := s.Text()
		switch {
		case cur == nil && l == "```go":
			cur = &strings.Builder{}
		case cur != nil && l == "```":
			if src := cur.String(); strings.HasPrefix(src, "package main\n") {
				out = append(out, src)
			}
			cur = nil
		case cur != nil:
			cur.WriteString(l + "\n")
		}
	}
	require.NoError(t, s.Err())
	return out
}

// runProgram writes src as main.go of a new module that requires this
// checkout (a replace directive, as a user trying an unreleased copy would
// write), resolves its requirements with go mod tidy, runs it, and returns
// its standard output.
func runProgram(t *testing.T, src string) string {
	t.Helper()
	checkout, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	mod := "module example\n\ngo 1.26\n\nrequire github.com/redlock-go/redlock v0.0.0\n\n" +
		"replace github.com/redlock-go/redlock => " + checkout + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	goCmd := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		return cmd
	}
	tidy, err := goCmd("mod", "tidy").CombinedOutput()
	require.NoError(t, err, "go mod tidy: %s", tidy)
	cmd := goCmd("run", ".")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "go run: %s", stderr.String())
	return string(stdout)
}
