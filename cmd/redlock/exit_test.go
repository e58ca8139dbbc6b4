package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// refusal tells a lock held elsewhere (75: the library said ErrHeld or
// ErrSplit) from nodes failing or a wait that ended before anything told
// (69) and nodes refusing this client for good (78).
func TestRefusal(t *testing.T) {
	down := func(i int) error { return &report.NodeError{Index: i, Err: report.ErrNodeDown} }
	wrongPass := func(i int) error {
		return &report.NodeError{Index: i, Err: fmt.Errorf("%w: WRONGPASS invalid username-password pair", redlock.ErrMisconfigured)}
	}
	refusedAs := func(class error, nodeErrs ...error) error {
		return errors.Join(append([]error{fmt.Errorf("%w: 0 of 3 nodes granted", class)}, nodeErrs...)...)
	}
	notAcquired := func(nodeErrs ...error) error { return refusedAs(redlock.ErrHeld, nodeErrs...) }
	for _, c := range []struct {
		name                    string
		err                     error
		n, quorum               int
		status, failed, refused int
	}{
		{"held elsewhere", notAcquired(), 3, 2, exitTempFail, 0, 0},
		{"held elsewhere, one node down", notAcquired(down(2)), 3, 2, exitTempFail, 1, 0},
		{"held elsewhere, one node refusing", notAcquired(wrongPass(2)), 3, 2, exitTempFail, 1, 1},
		{"two nodes down", notAcquired(down(1), down(2)), 3, 2, exitUnavailable, 2, 0},
		{"one down, one refusing", notAcquired(down(1), wrongPass(2)), 3, 2, exitUnavailable, 2, 1},
		{"two nodes refusing", notAcquired(wrongPass(1), wrongPass(2)), 3, 2, exitConfig, 2, 2},
		{"a semaphore's quorum of all 3: one down", notAcquired(down(0)), 3, 3, exitUnavailable, 1, 0},
		{"five nodes, two down", notAcquired(down(0), down(1)), 5, 3, exitTempFail, 2, 0},
		{"five nodes, three refusing", notAcquired(wrongPass(0), wrongPass(1), wrongPass(4)), 5, 3, exitConfig, 3, 3},
		{"split between contenders", refusedAs(redlock.ErrSplit), 3, 2, exitTempFail, 0, 0},
		// Nothing says another holds it: the wait ended before an attempt
		// could tell, or the grant came too late.
		{"the wait ended first", refusedAs(redlock.ErrNotAcquired, context.DeadlineExceeded), 3, 2, exitUnavailable, 0, 0},
		{"the wait ended first, one node down", refusedAs(redlock.ErrNotAcquired, down(2)), 3, 2, exitUnavailable, 1, 0},
		{"nodes failed", refusedAs(redlock.ErrNodesFailed, down(2)), 3, 2, exitUnavailable, 1, 0},
	} {
		status, failed, refused := refusal(c.err, c.n, c.quorum)
		assert.Equal(t, []int{c.status, c.failed, c.refused}, []int{status, failed, refused}, c.name)
	}
}

// What stderr says of each refusal is what its error says: "held
// elsewhere" only where the library said so.
func TestRefusalReason(t *testing.T) {
	down := &report.NodeError{Index: 2, Err: report.ErrNodeDown}
	for _, c := range []struct {
		name, want string
		err        error
	}{
		{"held", "held elsewhere; 1 of 3 nodes failed", errors.Join(fmt.Errorf("%w: held", redlock.ErrHeld), down)},
		{"nodes failed", "1 of 3 nodes failed, too many for the refusals alone", errors.Join(fmt.Errorf("%w: failed", redlock.ErrNodesFailed), down)},
		{"the wait ended", "nothing said another holds it", errors.Join(redlock.ErrNotAcquired, context.DeadlineExceeded)},
	} {
		status, failed, refused := refusal(c.err, 3, 2)
		assert.Contains(t, reason(status, c.err, "held elsewhere", 3, 2, failed, refused), c.want, c.name)
	}
}

// `redlock run` exits 75 only when the lock is held elsewhere: 69 when
// two of three nodes are gone, 78 when two refuse its password.
func TestRunExitCodes(t *testing.T) {
	servers, clients, urls := semNodes(t, 3)
	rl, err := redlock.New(clients)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, rl.Close(context.Background())) })
	m, err := rl.NewMutex("job")
	require.NoError(t, err)
	require.NoError(t, m.Lock(t.Context()))

	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitTempFail, cli([]string{"run", "--nodes", urls, "job", "--", "true"}, env(nil), &stdout, &stderr))
	assert.Contains(t, stderr.String(), `lock "job" not acquired in one attempt: held elsewhere`)
	require.NoError(t, m.Unlock(t.Context()))

	for _, s := range servers[1:] {
		s.RequireAuth("secret")
	}
	stderr.Reset()
	assert.Equal(t, exitConfig, cli([]string{"run", "--nodes", urls, "job", "--", "true"}, env(nil), &stdout, &stderr))
	assert.Contains(t, stderr.String(), "2 of 3 nodes refuse it for a reason no retry changes")

	// The refused run's release of node 0 may still be on its way on a
	// loaded machine: the lock is free there before the next run.
	require.Eventually(t, func() bool { return !servers[0].Exists("job") }, 5*time.Second, time.Millisecond)
	for _, s := range servers[1:] {
		s.Close()
	}
	stderr.Reset()
	// A wait long enough for attempts to fail on a loaded machine (under
	// make test, 300 ms once ended before any attempt had told why).
	assert.Equal(t, exitUnavailable, cli([]string{"run", "--nodes", urls, "--wait", "2s", "job", "--", "true"}, env(nil), &stdout, &stderr))
	assert.Contains(t, stderr.String(), "2 of 3 nodes failed, a quorum of 2 cannot grant it")
	assert.Equal(t, 2, strings.Count(stderr.String(), "\n  node "), "both named: %s", &stderr)
	assert.Empty(t, stdout.String())
}

// doctor's verdict of a node that refuses this client (a wrong password)
// is "refused", as its finding says, not "unreachable"; it fails the
// gate.
func TestDoctorRefusedVerdict(t *testing.T) {
	servers, _, urls := semNodes(t, 2)
	servers[1].RequireAuth("secret")
	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitUnsafe, cli([]string{"doctor", "--nodes", urls, "--json"}, env(nil), &stdout, &stderr), stderr.String())
	var out []auditJSON
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
	require.Len(t, out, 2)
	assert.Equal(t, "refused", out[1].Verdict)
	require.Len(t, out[1].Findings, 1)
	assert.Equal(t, findingJSON{Severity: "degraded", Code: "refused"}, findingJSON{Severity: out[1].Findings[0].Severity, Code: out[1].Findings[0].Code})

	stdout.Reset()
	assert.Equal(t, exitUnsafe, cli([]string{"doctor", "--nodes", urls}, env(nil), &stdout, &stderr))
	assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(servers[1].Addr())+` +(- +){8}refused$`, stdout.String())
	assert.Contains(t, stdout.String(), servers[1].Addr()+": degraded refused: ")
}
