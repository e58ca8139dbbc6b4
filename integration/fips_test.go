package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFIPSOnly runs the library's operations, the redlock command and the
// demo in processes started with GODEBUG=fips140=only, which panic on the
// first use of SHA-1 (script digests are constants for this reason).
func TestFIPSOnly(t *testing.T) {
	c := startCluster(t, 5)
	addrs := make([]string, c.Len())
	urls := make([]string, c.Len())
	for i := range addrs {
		addrs[i] = c.Addr(i)
		urls[i] = "redis://" + c.Addr(i)
	}

	t.Run("library", func(t *testing.T) {
		bin := buildFIPS(t, "github.com/redlock-go/redlock/integration/fipsload")
		out := runFIPS(t, bin, "REDLOCK_NODES="+strings.Join(addrs, ","))
		assert.Contains(t, out, "fipsload: ok")
	})

	t.Run("command", func(t *testing.T) {
		bin := buildFIPS(t, "github.com/redlock-go/redlock/cmd/redlock")
		nodes := "REDLOCK_NODES=" + strings.Join(urls, ",")
		out := runFIPS(t, bin, nodes, "run", "--fencing", "fips:cli", "--", "sh", "-c", `echo "held $REDLOCK_FENCE"`)
		assert.Contains(t, out, "held ")
		out = runFIPS(t, bin, nodes, "status", "fips:cli")
		assert.Contains(t, out, "fips:cli")
	})

	t.Run("command over TLS", func(t *testing.T) {
		// Three TLS nodes and nothing else: a quorum means two handshakes
		// at least, in FIPS mode.
		tn := startTLS(t, 3)
		var roots []byte
		tlsURLs := make([]string, len(tn))
		for i, n := range tn {
			roots = append(roots, n.CAPEM()...)
			tlsURLs[i] = "rediss://" + n.Addr()
		}
		ca := filepath.Join(t.TempDir(), "ca.pem")
		require.NoError(t, os.WriteFile(ca, roots, 0o600))
		bin := buildFIPS(t, "github.com/redlock-go/redlock/cmd/redlock")
		out := runFIPS(t, bin, "REDLOCK_NODES="+strings.Join(tlsURLs, ",")+"\x00SSL_CERT_FILE="+ca,
			"run", "fips:tls", "--", "echo", "held over TLS")
		assert.Contains(t, out, "held over TLS")
	})

	t.Run("demo", func(t *testing.T) {
		bin := buildFIPS(t, "github.com/redlock-go/redlock/integration/cmd/redlock-demo")
		out := runFIPS(t, bin, "", "-workers", "2", "-phase", "500ms")
		assert.Contains(t, out, "no majority", "the demo reached its last phase")
	})
}

func buildFIPS(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// runFIPS runs bin with args in FIPS 140-only mode, with env added (when
// not empty; NUL-separated variables), and returns its standard output; the test fails unless it
// exits 0 within two minutes.
func runFIPS(t *testing.T, bin, env string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=only")
	if env != "" {
		cmd.Env = append(cmd.Env, strings.Split(env, "\x00")...)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s %v in FIPS 140-only mode: stdout %s, stderr %s", filepath.Base(bin), args, out, stderr.String())
	return string(out)
}
