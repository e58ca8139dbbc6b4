package integration

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/redlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The server matrix: the suites that matter, on three processes of each
// server scripts/fetch-servers.sh fetches (Redis 7.0 and 8.6, Valkey 8.0,
// 8.1 and 9.1), checked against docs/DEPLOYMENTS.md's table of servers.

// matrixNodes is how many servers of each launcher the matrix runs.
const matrixNodes = 3

// TestServerMatrix runs, per server: what the library detects against the
// documented table, lock/extend/unlock, the node protocol's cases in every
// way, the contended safety workload of
// every lock kind, each primitive under contention, the same as a user
// refused scripts, and the clock guard's TIME.
func TestServerMatrix(t *testing.T) {
	launchers := requireLaunchers(t)
	table := serverTable(t)
	for _, l := range launchers {
		_, ok := table[l.Name]
		require.True(t, ok, "docs/DEPLOYMENTS.md's table of servers has no row for %s, which make test runs", l.Name)
	}
	for name := range table {
		require.True(t, slices.ContainsFunc(launchers, func(l Launcher) bool { return l.Name == name }),
			"docs/DEPLOYMENTS.md's table of servers prints %s, which make test does not run (scripts/fetch-servers.sh)", name)
	}
	for _, l := range launchers {
		t.Run(l.Name, func(t *testing.T) {
			row := table[l.Name]
			s := startServers(t, l, matrixNodes)
			t.Run("detected", func(t *testing.T) { matrixDetected(t, s, row) })
			t.Run("lock", func(t *testing.T) { matrixLock(t, s) })
			t.Run("conformance", func(t *testing.T) { matrixConformance(t, s, row) })
			t.Run("safety", func(t *testing.T) { eachKind(t, allClients(s, nil), "matrix:safety") })
			for _, client := range otherClients {
				t.Run("over "+client, func(t *testing.T) {
					addrs := make([]string, s.Len())
					for i := range addrs {
						addrs[i] = s.Addr(i)
					}
					t.Run("safety", func(t *testing.T) { eachKindOver(t, otherMade(client, specsOf(addrs...)), "matrix:"+client) })
					// The primitives, contended, with their checks.
					over := overClient{s, client}
					t.Run("rwmutex", func(t *testing.T) { rwContention(t, over, false, redlock.WithNodeTimeout(time.Second)) })
					t.Run("semaphore", func(t *testing.T) {
						n, _ := semContention(t, over, 4, 2*time.Second)
						assert.Greater(t, n, 20)
					})
					t.Run("multi", func(t *testing.T) { multiContention(t, over, false, redlock.WithNodeTimeout(time.Second)) })
				})
			}
			// A node that answers within a second is up, as in the
			// safety workload: a loaded machine is not what the matrix is
			// about (the contention tests' own 100 ms is).
			t.Run("rwmutex", func(t *testing.T) { rwContention(t, s, false, redlock.WithNodeTimeout(time.Second)) })
			t.Run("semaphore", func(t *testing.T) {
				n, _ := semContention(t, s, 4, 2*time.Second)
				assert.Greater(t, n, 20)
			})
			t.Run("multi", func(t *testing.T) { multiContention(t, s, false, redlock.WithNodeTimeout(time.Second)) })
			t.Run("full ACL line", func(t *testing.T) { matrixFullLine(t, s) })
			t.Run("without scripts", func(t *testing.T) { matrixWithoutScripts(t, s, row) })
			t.Run("clock", func(t *testing.T) { matrixClock(t, s) })
			t.Run("without Lua", func(t *testing.T) { matrixWithoutLua(t, s, row) }) // last: it unloads Lua for good
		})
	}
}

// allClients returns a nodesOf that gives each Redlock new clients of
// every server, with opts.
func allClients(s nodeSet, opts *redis.Options) nodesOf {
	return func(int) []redis.UniversalClient { return s.Clients(opts) }
}

// serverRow is one row of docs/DEPLOYMENTS.md's table of servers.
type serverRow struct {
	launcher, server, suite string
	cmds                    commands
	// withScripts and withoutScripts are NodeHealth.Speaks for an admin and
	// for a user refused scripts.
	withScripts, withoutScripts string
}

// commands are the native commands a server accepts.
type commands struct{ setIfEq, delIfEq, delEx bool }

// serverTable reads docs/DEPLOYMENTS.md's table of servers, by launcher.
func serverTable(t *testing.T) map[string]serverRow {
	t.Helper()
	doc, err := os.ReadFile("../docs/DEPLOYMENTS.md")
	require.NoError(t, err)
	const header = "| launcher | server | Debian suite | `SET k v IFEQ old` | `DELIFEQ k v` | `DELEX k IFEQ v` | with scripts | without scripts |"
	_, after, ok := strings.Cut(string(doc), header+"\n")
	require.True(t, ok, "docs/DEPLOYMENTS.md has no table of servers headed %s", header)
	yes := func(cell string) bool {
		require.Contains(t, []string{"yes", "no"}, cell, "a command column of the table of servers")
		return cell == "yes"
	}
	rows := map[string]serverRow{}
	for line := range strings.Lines(after) {
		if !strings.HasPrefix(line, "|") {
			break
		}
		var cells []string
		for c := range strings.SplitSeq(strings.Trim(strings.TrimSpace(line), "|"), "|") {
			cells = append(cells, strings.Trim(strings.TrimSpace(c), "`"))
		}
		require.Len(t, cells, 8, "a row of the table of servers: %q", line)
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows[cells[0]] = serverRow{
			launcher: cells[0], server: cells[1], suite: cells[2],
			cmds:        commands{setIfEq: yes(cells[3]), delIfEq: yes(cells[4]), delEx: yes(cells[5])},
			withScripts: cells[6], withoutScripts: cells[7],
		}
	}
	require.NotEmpty(t, rows, "the table of servers has no rows")
	return rows
}

// probeCommands asks a server whether it accepts each native command, on
// a key that does not exist (nothing is written).
func probeCommands(t *testing.T, ctx context.Context, rc *redis.Client) commands {
	t.Helper()
	const key = "matrix:probe"
	require.NoError(t, rc.Del(ctx, key).Err())
	return commands{
		setIfEq: accepted(t, rc.Do(ctx, "SET", key, "v", "IFEQ", "old").Err()),
		delIfEq: accepted(t, rc.Do(ctx, "DELIFEQ", key, "v").Err()),
		delEx:   accepted(t, rc.Do(ctx, "DELEX", key, "IFEQ", "v").Err()),
	}
}

// accepted tells a server's answer to a command it runs (a reply, or nil)
// from its refusal of a command or syntax it does not know.
func accepted(t *testing.T, err error) bool {
	t.Helper()
	if err == nil || err == redis.Nil { //nolint:errorlint // go-redis returns redis.Nil itself
		return true
	}
	msg := err.Error()
	if strings.Contains(msg, "unknown command") || strings.Contains(msg, "syntax error") {
		return false
	}
	require.NoError(t, err, "neither a reply nor an unknown command")
	return false
}

// matrixDetected probes the server's native commands and what the library
// detects (Audit, Health) and compares both with the table's row.
func matrixDetected(t *testing.T, s *Servers, row serverRow) {
	t.Helper()
	ctx := timeout(t, time.Minute)
	launcher, err := os.ReadFile(s.Launcher().Path)
	require.NoError(t, err)
	assert.Contains(t, string(launcher), "from Debian "+row.suite+")", "the launcher's Debian suite")
	for i, a := range inspector(t, s) {
		got := probeCommands(t, ctx, a)
		assert.Equal(t, row.cmds, got, "server %d: the native commands it accepts (table: %+v)", i, row)
	}
	rl := newRedlock(t, s)
	m := newMutex(t, rl, "matrix:detected")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Unlock(ctx))
	audits, err := rl.Audit(ctx)
	require.NoError(t, err)
	name, version, _ := strings.Cut(row.server, " ")
	for _, a := range audits {
		require.NoError(t, a.Err, "node %d", a.Index)
		assert.Equal(t, strings.ToLower(name), a.Server, "node %d", a.Index)
		assert.True(t, strings.HasPrefix(a.Version, version+"."), "node %d: version %s, the table says %s", a.Index, a.Version, row.server)
		assert.Equal(t, ways(row.withScripts, row.withoutScripts), a.Ways, "node %d: the ways Audit finds", a.Index)
	}
	for _, h := range rl.Health() {
		assert.Equal(t, row.withScripts, h.Speaks, "node %d", h.Index)
		assert.Empty(t, h.FeaturesOff, "node %d: nothing turned off", h.Index)
	}
	a := audits[0]
	var findings []string
	for _, f := range a.Findings {
		findings = append(findings, f.Severity.String()+" "+f.Code)
	}
	t.Logf("%s: %s %s; SET IFEQ %v, DELIFEQ %v, DELEX %v; ways %v; findings %v",
		s.Launcher().Name, a.Server, a.Version, row.cmds.setIfEq, row.cmds.delIfEq, row.cmds.delEx, a.Ways, findings)
}

// ways returns the ways Audit lists for a node: first, scripts, then the
// way without them, then transactions (always possible).
func ways(first ...string) []string {
	var out []string
	for _, w := range append(first, "transactions") {
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}
