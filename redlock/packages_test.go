package redlock

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What each internal package of this module may know of it, lowest first
// (docs/ARCHITECTURE.md): Go's import rules keep them from importing up (a
// cycle), and this keeps each from reaching sideways or down into what it
// should not know (the waiters for quorum, the identities for the lease,
// the facade for the nodes, ...). Standard and third-party packages are
// free; test files are not checked (a test may drive its package through
// the facade).
var mayImport = map[string][]string{
	"internal/scripts":       {},
	"internal/jitter":        {},
	"internal/life":          {},
	"internal/identity":      {},
	"internal/node":          {"internal/scripts", "internal/jitter", "internal/life"},
	"internal/node/nodetest": {"internal/node", "internal/scripts"},
	// The go-redis transport: the one package below the facade that names
	// go-redis (see goRedisAllowed).
	"internal/node/goredis":             {"internal/node", "internal/life"},
	"internal/node/goredis/goredistest": {},
	// The rueidis transport, go-redis' twin for redlockrueidis, and its
	// valkey-go copy (generated) for redlockvalkey.
	"internal/node/rueidiswire": {"internal/node", "internal/life"},
	"internal/node/valkeywire":  {"internal/node", "internal/life"},
	// The hook redlockrueidis builds a Redlock through (set by package
	// redlock).
	"internal/adapt": {"internal/node"},
	// The node protocol's cases: what every way and the fake are held to.
	"internal/node/conformance": {"internal/node"},
	"internal/waitq":            {"internal/node", "internal/jitter", "internal/life"},
	"internal/sim":              {"redlock", "redlock/report", "internal/jitter"},

	"redlock/internal/quorum": {"internal/node", "internal/jitter", "internal/life"},
	"redlock/internal/engine": {"internal/node", "internal/waitq", "internal/identity", "internal/scripts", "internal/jitter", "internal/life", "redlock/internal/quorum"},
	"redlock/internal/lease":  {"internal/node", "redlock/internal/quorum", "redlock/internal/engine"},
	"redlock/internal/turn":   {"internal/node", "internal/waitq", "internal/jitter", "redlock/internal/quorum", "redlock/internal/engine", "redlock/internal/lease"},
}

const module = "github.com/redlock-go/redlock/"

// TestPackageImports checks every internal package (under redlock/ and at
// the top) against mayImport, and that each has a row there.
func TestPackageImports(t *testing.T) {
	var dirs []string
	for _, pattern := range []string{"internal/*", "../internal/*", "../internal/*/*", "../internal/*/*/*"} {
		found, err := filepath.Glob(pattern)
		require.NoError(t, err)
		for _, dir := range found {
			if info, err := os.Stat(dir); err == nil && info.IsDir() && hasGo(t, dir) {
				dirs = append(dirs, dir)
			}
		}
	}
	require.Len(t, dirs, len(mayImport), "a package directory for each row: %v", dirs)
	for _, dir := range dirs {
		pkg := filepath.ToSlash(filepath.Join("redlock", dir)) // "redlock/../internal/x" is "internal/x"
		allowed, ok := mayImport[pkg]
		if !assert.True(t, ok, "%s has no row in mayImport", pkg) {
			continue
		}
		for _, imp := range moduleImports(t, dir) {
			assert.True(t, slices.Contains(allowed, imp), "%s imports %s, which it may not know", pkg, imp)
		}
	}
}

// goRedisAllowed are the packages whose non-test files may import
// go-redis: the transport and its tests' servers, the facade (New and
// SetFenced take go-redis clients) and the simulator, which makes clients
// for New as a user does. The node layer speaks commands (internal/node).
var goRedisAllowed = []string{"redlock", "internal/node/goredis", "internal/node/goredis/goredistest", "internal/sim"}

// TestGoRedisOnlyInTheTransport checks that no other package of the
// library names go-redis.
func TestGoRedisOnlyInTheTransport(t *testing.T) {
	dirs := []string{"."}
	for _, pattern := range []string{"internal/*", "../internal/*", "../internal/*/*", "../internal/*/*/*", "report"} {
		found, err := filepath.Glob(pattern)
		require.NoError(t, err)
		for _, dir := range found {
			if info, err := os.Stat(dir); err == nil && info.IsDir() && hasGo(t, dir) {
				dirs = append(dirs, dir)
			}
		}
	}
	for _, dir := range dirs {
		pkg := filepath.ToSlash(filepath.Join("redlock", dir))
		for _, imp := range imports(t, dir) {
			if strings.HasPrefix(imp, "github.com/redis/go-redis/") {
				assert.True(t, slices.Contains(goRedisAllowed, pkg), "%s imports %s", pkg, imp)
			}
		}
	}
}

// moduleImports returns the packages of this module that dir's non-test
// files import, relative to the module.
func moduleImports(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, path := range imports(t, dir) {
		if rel, ok := strings.CutPrefix(path, module); ok {
			out = append(out, rel)
		}
	}
	return out
}

// imports returns the packages dir's non-test files import.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, spec := range f.Imports {
			path, err := strconv.Unquote(spec.Path.Value)
			require.NoError(t, err)
			if !slices.Contains(out, path) {
				out = append(out, path)
			}
		}
	}
	return out
}

// hasGo reports whether dir holds Go files of its own.
func hasGo(t *testing.T, dir string) bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".go") {
			return true
		}
	}
	return false
}
