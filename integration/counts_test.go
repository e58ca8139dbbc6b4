package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// Counts and verdicts that match the nodes, on three redis-server
// processes: the holder's extension after a forced unlock of every node
// names all three; a node killed is reported down since the first failure
// seen; `redlock run` exits 75 only when the lock is held elsewhere; doctor
// calls a node with a wrong password "refused", as its finding does.

// TestForcedUnlockCountsEveryNode: an operator's ForceUnlock deletes the
// lock on all three nodes; the holder's next Extend says the token is gone
// from all three, not from the two that answered first.
func TestForcedUnlockCountsEveryNode(t *testing.T) {
	s := startServers(t, requireLaunchers(t)[0], 3)
	// Node timeouts a loaded machine (-race) does not reach: the count is
	// the test.
	holder := newRedlock(t, s, redlock.WithNodeTimeout(time.Second))
	operator := newRedlock(t, s, redlock.WithNodeTimeout(time.Second))
	m := newMutex(t, holder, "counts:forced", redlock.WithTTL(time.Minute))
	require.NoError(t, m.Lock(t.Context()))
	// Lock returns at a quorum: the third node's SET may still be on its
	// way, and a forced unlock that overtook it would find nothing there.
	require.Eventually(t, func() bool {
		for _, c := range s.Clients(nil) {
			if c.Exists(t.Context(), "counts:forced").Val() != 1 {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the lock on every node")
	out, err := operator.ForceUnlock(t.Context(), "counts:forced")
	require.NoError(t, err)
	for _, fr := range out {
		require.True(t, fr.Deleted, "deleted on node %d", fr.Index)
	}
	err = m.Extend(t.Context())
	require.ErrorIs(t, err, redlock.ErrLockLost)
	assert.Contains(t, err.Error(), "extended on 0 of 3 nodes, quorum 2; the token is gone from nodes 0, 1 and 2: ")
	assert.Empty(t, report.NodeErrors(err), "every node answered")
}

// TestExtensionCountsTheNodeUp: nodes 1 and 2 killed, the holder's
// extensions fail; node 0 extends each time, and each error counts it,
// though the two dead nodes decided the round before it answered.
func TestExtensionCountsTheNodeUp(t *testing.T) {
	s := startServers(t, requireLaunchers(t)[0], 3)
	rl := newRedlock(t, s)
	m := newMutex(t, rl, "counts:up", redlock.WithTTL(time.Minute))
	require.NoError(t, m.Lock(t.Context()))
	require.NoError(t, s.Kill(t.Context(), 1))
	require.NoError(t, s.Kill(t.Context(), 2))
	for try := range 3 { // the first finds them refusing, the next down
		err := m.Extend(t.Context())
		require.Error(t, err)
		assert.NotErrorIs(t, err, redlock.ErrNotHeld, "the dead nodes said nothing of the token")
		assert.Contains(t, err.Error(), "extension not confirmed: extended on 1 of 3 nodes, quorum 2\n", "extension %d", try)
		assert.Len(t, report.NodeErrors(err), 2, "extension %d", try)
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDownSinceFirstFailure: node 2 is killed while the lock is held; the
// holder's extension is granted by nodes 0 and 1 while node 2's request
// goes unanswered (go-redis retries its dials past the node timeout), and
// the node is put down only when that request's error comes back, or at
// the next request. It is reported down since the extension's node
// timeout: the first failure seen.
func TestDownSinceFirstFailure(t *testing.T) {
	s := startServers(t, requireLaunchers(t)[0], 3)
	rl := newRedlock(t, s) // go-redis' default options: five dials per call
	m := newMutex(t, rl, "counts:down", redlock.WithTTL(time.Minute))
	require.NoError(t, m.Lock(t.Context()))
	require.NoError(t, s.Kill(t.Context(), 2))
	start := time.Now()
	require.NoError(t, m.Extend(t.Context()), "nodes 0 and 1 extend it")
	require.Eventually(t, func() bool { return rl.Health()[2].Down }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(time.Second)
	h := rl.Health()[2]
	t.Logf("killed, extended at 0; node 2 down since %v: %v", h.Since.Sub(start), h.Err)
	assert.WithinRange(t, h.Since, start, start.Add(100*time.Millisecond+150*time.Millisecond),
		"down since the extension's request went unanswered, %v after it", h.Since.Sub(start))
	require.NoError(t, m.Unlock(t.Context()))
}

// TestCLIExitStatuses: `redlock run` exits 75 when the lock is held
// elsewhere, 78 when two of three nodes refuse its password, 69 when two
// of three are killed, so that a cron job's "|| [ $? -eq 75 ]" hides a
// busy lock and nothing else.
func TestCLIExitStatuses(t *testing.T) {
	s := startServers(t, requireLaunchers(t)[0], 3)
	bin := buildCLI(t)
	urls := func(password ...string) string {
		out := make([]string, s.Len())
		for i := range out {
			out[i] = "redis://" + s.Addr(i)
			if i < len(password) && password[i] != "" {
				out[i] = "redis://:" + password[i] + "@" + s.Addr(i)
			}
		}
		return strings.Join(out, ",")
	}
	cli := cliRunner{bin: bin, nodes: urls()}

	rl := newRedlock(t, s)
	m := newMutex(t, rl, "counts:cli", redlock.WithTTL(time.Minute))
	require.NoError(t, m.Lock(t.Context()))
	code, _, stderr := cli.run(t, "run", "counts:cli", "--", "true")
	assert.Equal(t, 75, code, stderr)
	assert.Contains(t, stderr, `lock "counts:cli" not acquired in one attempt: held elsewhere`)
	require.NoError(t, m.Unlock(t.Context()))

	// Nodes 1 and 2 ask for a password the command does not give.
	for _, a := range inspector(t, s)[1:] {
		require.NoError(t, a.ConfigSet(t.Context(), "requirepass", "secret").Err())
	}
	wrong := cliRunner{bin: bin, nodes: urls("", "wrong", "wrong")}
	code, _, stderr = wrong.run(t, "run", "counts:cli", "--", "true")
	assert.Equal(t, 78, code, stderr)
	assert.Contains(t, stderr, "2 of 3 nodes refuse it for a reason no retry changes")
	assert.Contains(t, stderr, "WRONGPASS")

	// Nodes 1 and 2 killed: the lock may well be free, no quorum can
	// grant it.
	require.NoError(t, s.Kill(t.Context(), 1))
	require.NoError(t, s.Kill(t.Context(), 2))
	code, _, stderr = cli.run(t, "run", "counts:cli", "--", "true")
	assert.Equal(t, 69, code, stderr)
	assert.Contains(t, stderr, "2 of 3 nodes failed, a quorum of 2 cannot grant it")
	p := cli.start(t, "run", "--wait", "1s", "counts:cli", "--", "true")
	assert.Equal(t, 69, p.wait(t), "also after waiting: %s", p.stderr.String())
}

// TestDoctorWrongPassword: a node that refuses doctor's password has the
// verdict "refused", as its finding "degraded refused" says, and fails
// the gate.
func TestDoctorWrongPassword(t *testing.T) {
	s := startServers(t, requireLaunchers(t)[0], 3)
	require.NoError(t, inspector(t, s)[1].ConfigSet(context.Background(), "requirepass", "secret").Err())
	nodes := []string{"redis://" + s.Addr(0), "redis://:wrong@" + s.Addr(1), "redis://" + s.Addr(2)}
	cli := cliRunner{bin: buildCLI(t), nodes: strings.Join(nodes, ",")}
	code, out, stderr := cli.run(t, "doctor", "--restart-delay", "30s")
	t.Logf("redlock doctor, node 1 with a wrong password, exit %d:\n%s%s", code, out, stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, s.Addr(1)+": degraded refused: ")
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, s.Addr(1)+" ") {
			assert.True(t, strings.HasSuffix(line, " refused\n"), "verdict: %q", line)
		}
	}

	code, out, _ = cli.run(t, "doctor", "--restart-delay", "30s", "--json")
	assert.Equal(t, 1, code)
	var audits []struct {
		Verdict  string `json:"verdict"`
		Findings []struct {
			Severity, Code string
		} `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &audits), out)
	require.Len(t, audits, 3)
	assert.Equal(t, "refused", audits[1].Verdict)
	require.Len(t, audits[1].Findings, 1)
	assert.Equal(t, "refused", audits[1].Findings[0].Code)
	assert.Equal(t, "degraded", audits[1].Findings[0].Severity)
}
