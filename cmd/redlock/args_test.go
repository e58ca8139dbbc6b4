package main

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

const nodes = "redis://127.0.0.1:6379,rediss://user:secret@127.0.0.1:6380/2"

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestUsageErrors(t *testing.T) {
	withNodes := env(map[string]string{"REDLOCK_NODES": nodes})
	for _, tc := range []struct {
		name string
		args []string
		env  func(string) string
		want string // in the message
	}{
		{"nothing", nil, withNodes, "no subcommand"},
		{"unknown subcommand", []string{"lock", "x"}, withNodes, `unknown subcommand "lock"`},
		{"flag before subcommand", []string{"--nodes", nodes, "run"}, withNodes, "before the subcommand"},
		{"help for an unknown subcommand", []string{"help", "frob"}, withNodes, `no help for "frob"`},
		{"help with two topics", []string{"help", "run", "status"}, withNodes, "one subcommand"},
		{"unknown flag", []string{"run", "--ttl", "1s", "--bogus", "x", "--", "true"}, withNodes, "flag provided but not defined: -bogus"},
		{"no name", []string{"run"}, withNodes, "no lock name"},
		{"doctor with a name", []string{"doctor", "job"}, withNodes, "doctor takes no lock name"},
		{"doctor with a short restart delay", []string{"doctor", "--restart-delay", "1s"}, withNodes, "--restart-delay must be 0 or at least 2s"},
		{"doctor with fewer than no replicas", []string{"doctor", "--replica-ack", "-1"}, withNodes, "--replica-ack must be 0 or more replicas, got -1"},
		{"doctor without nodes", []string{"doctor"}, env(nil), "no nodes"},
		{"only a name after --", []string{"run", "--", "true"}, withNodes, "no command"},
		{"empty name", []string{"status", ""}, withNodes, "empty lock name"},
		{"no command", []string{"run", "job"}, withNodes, "no command"},
		{"no command after --", []string{"run", "job", "--"}, withNodes, "no command"},
		{"empty command", []string{"run", "job", "--", ""}, withNodes, "empty command"},
		{"flag after the name", []string{"run", "job", "--ttl", "5s", "--", "true"}, withNodes, "flags go before NAME"},
		{"bad ttl", []string{"run", "--ttl", "ten", "job", "--", "true"}, withNodes, `invalid value "ten" for flag -ttl`},
		{"zero ttl", []string{"run", "--ttl", "0s", "job", "--", "true"}, withNodes, "--ttl must be a positive"},
		{"negative ttl", []string{"run", "--ttl", "-1s", "job", "--", "true"}, withNodes, "--ttl must be a positive"},
		{"sub-millisecond ttl", []string{"run", "--ttl", "1500us", "job", "--", "true"}, withNodes, "whole number of milliseconds"},
		{"tiny ttl", []string{"run", "--ttl", "2ms", "job", "--", "true"}, withNodes, "too short"},
		{"bad wait", []string{"run", "--wait", "soon", "job", "--", "true"}, withNodes, `invalid value "soon" for flag -wait`},
		{"negative wait", []string{"run", "--wait", "-1s", "job", "--", "true"}, withNodes, "--wait must not be negative"},
		{"no nodes", []string{"status", "job"}, env(nil), "no nodes"},
		{"blank nodes", []string{"status", "--nodes", " ", "job"}, env(nil), "no nodes"},
		{"stray comma", []string{"status", "--nodes", "redis://a:1,", "job"}, env(nil), "node URL 1 is empty"},
		{"not a redis URL", []string{"status", "--nodes", "http://a:1", "job"}, env(nil), "not a redis:// or rediss:// URL"},
		{"a host without a scheme", []string{"status", "--nodes", "127.0.0.1:6379", "job"}, env(nil), "not a redis:// or rediss:// URL"},
		{"bad database", []string{"status", "--nodes", "redis://a:1/x", "job"}, env(nil), "invalid database"},
		{"bad URL", []string{"status", "--nodes", "redis://a:1/%zz", "job"}, env(nil), "node URL 0: not a valid URL"},
		{"bad env URL", []string{"status", "job"}, env(map[string]string{"REDLOCK_NODES": "redis://a:bad"}), "node URL 0: not a valid URL"},
		{"unlock without --force", []string{"unlock", "job"}, withNodes, "--force is required"},
		{"status with extra args", []string{"status", "job", "more"}, withNodes, `unexpected "more"`},
		{"status --force", []string{"status", "--force", "job"}, withNodes, "not defined: -force"},
		{"unlock --json", []string{"unlock", "--force", "--json", "job"}, withNodes, "not defined: -json"},
		{"name like a flag", []string{"status", "--", "-job"}, withNodes, "starts with '-'"},
		{"zero permits", []string{"run", "--permits", "0", "job", "--", "true"}, withNodes, "--permits must be a whole number of at least 1"},
		{"negative permits", []string{"run", "--permits", "-2", "job", "--", "true"}, withNodes, "--permits must be a whole number of at least 1"},
		{"permits not a number", []string{"run", "--permits", "two", "job", "--", "true"}, withNodes, `invalid value "two" for flag -permits`},
		{"fractional permits", []string{"run", "--permits", "1.5", "job", "--", "true"}, withNodes, "--permits must be a whole number"},
		{"permits without a value", []string{"run", "job", "--permits"}, withNodes, "flags go before NAME"},
		{"permits with fencing", []string{"run", "--permits", "2", "--fencing", "job", "--", "true"}, withNodes, "--fencing cannot be used with --permits"},
		{"status --permits", []string{"status", "--permits", "2", "job"}, withNodes, "not defined: -permits"},
		{"read with fencing", []string{"run", "--read", "--fencing", "job", "--", "true"}, withNodes, "--fencing cannot be used with --read"},
		{"read with permits", []string{"run", "--read", "--permits", "2", "job", "--", "true"}, withNodes, "--read and --permits cannot be used together"},
		{"status --read", []string{"status", "--read", "job"}, withNodes, "not defined: -read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli(tc.args, tc.env, &stdout, &stderr)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, stderr.String(), tc.want)
			assert.True(t, strings.HasPrefix(stderr.String(), "redlock: "), "got %q", stderr.String())
			assert.Empty(t, stdout.String())
		})
	}
}

func TestNoPasswordInMessages(t *testing.T) {
	for _, list := range []string{
		"redis://user:hunter2@a:1/x",   // ParseURL fails: the message is redacted
		"redis://user:hunter2@a:1/%zz", // url.Parse fails: only the position
		"redis://user:hunter2@a:1,redis://user:hunter2@a:notaport",
	} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, exitUsage, cli([]string{"status", "--nodes", list, "job"}, env(nil), &stdout, &stderr))
		assert.NotContains(t, stderr.String(), "hunter2")
	}
}

func TestParseRun(t *testing.T) {
	inv, err := parseArgs([]string{"run", "--ttl", "30s", "--wait", "1m", "--fencing", "job", "--", "sh", "-c", "echo --x"}, env(map[string]string{"REDLOCK_NODES": nodes}))
	require.NoError(t, err)
	assert.Equal(t, "run", inv.cmd)
	assert.Equal(t, "job", inv.name)
	assert.Equal(t, 30*time.Second, inv.ttl)
	assert.Equal(t, time.Minute, inv.wait)
	assert.True(t, inv.fencing)
	assert.Equal(t, []string{"sh", "-c", "echo --x"}, inv.argv)
	require.Len(t, inv.nodes, 2)
	assert.Equal(t, "127.0.0.1:6379", inv.nodes[0].Addr)
	assert.Equal(t, "user", inv.nodes[1].Username)
	assert.Equal(t, "secret", inv.nodes[1].Password)
	assert.Equal(t, 2, inv.nodes[1].DB)
	assert.NotNil(t, inv.nodes[1].TLSConfig, "rediss:// is TLS")
	assert.Equal(t, "rediss://user:xxxxx@127.0.0.1:6380/2", inv.addrs[1])

	// Defaults; the command without "--"; --nodes wins over the environment.
	inv, err = parseArgs([]string{"run", "--nodes", "redis://127.0.0.9:7000", "job", "true"}, env(map[string]string{"REDLOCK_NODES": nodes}))
	require.NoError(t, err)
	assert.Equal(t, defaultTTL, inv.ttl)
	assert.Zero(t, inv.wait)
	assert.False(t, inv.fencing)
	assert.Equal(t, []string{"true"}, inv.argv)
	require.Len(t, inv.nodes, 1)
	assert.Equal(t, "127.0.0.9:7000", inv.nodes[0].Addr)

	// Flags after "--" belong to the command.
	inv, err = parseArgs([]string{"run", "--", "job", "ls", "--ttl"}, env(map[string]string{"REDLOCK_NODES": nodes}))
	require.NoError(t, err)
	assert.Equal(t, "job", inv.name)
	assert.Equal(t, []string{"ls", "--ttl"}, inv.argv)

	// A semaphore: --permits, with the run flags that go with it.
	inv, err = parseArgs([]string{"run", "--permits", "3", "--ttl", "5s", "--wait", "2s", "jobs", "--", "true"}, env(map[string]string{"REDLOCK_NODES": nodes}))
	require.NoError(t, err)
	assert.Equal(t, 3, inv.permits)
	assert.Equal(t, 5*time.Second, inv.ttl)
	assert.Equal(t, 2*time.Second, inv.wait)
	inv, err = parseArgs([]string{"run", "jobs", "--", "true"}, env(map[string]string{"REDLOCK_NODES": nodes}))
	require.NoError(t, err)
	assert.Zero(t, inv.permits, "a lock by default")

	inv, err = parseArgs([]string{"status", "--json", "job"}, env(map[string]string{"REDLOCK_NODES": nodes}))
	require.NoError(t, err)
	assert.True(t, inv.json)
	inv, err = parseArgs([]string{"unlock", "--force", "job"}, env(map[string]string{"REDLOCK_NODES": nodes}))
	require.NoError(t, err)
	assert.Equal(t, "unlock", inv.cmd)
}

func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "Usage:\n  redlock run"},
		{[]string{"-h"}, "Usage:\n  redlock run"},
		{[]string{"help"}, "cron"},
		{[]string{"help", "run"}, "Usage: redlock run"},
		{[]string{"run", "--help"}, "Usage: redlock run"},
		{[]string{"help", "status"}, "Usage: redlock status"},
		{[]string{"status", "-h"}, "Usage: redlock status"},
		{[]string{"help", "unlock"}, "Usage: redlock unlock --force"},
		{[]string{"unlock", "--help"}, "Usage: redlock unlock --force"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, exitOK, cli(tc.args, env(nil), &stdout, &stderr), "%v", tc.args)
		assert.Contains(t, stdout.String(), tc.want, "%v", tc.args)
		assert.Empty(t, stderr.String())
	}
}

func TestStartStatus(t *testing.T) {
	_, err := exec.LookPath("surely-no-such-command-here")
	assert.Equal(t, exitNotFound, startStatus(err))
	_, err = exec.LookPath("/no/such/file")
	assert.Equal(t, exitNotFound, startStatus(err))
	_, err = exec.LookPath(t.TempDir()) // a directory
	assert.Equal(t, exitCannotExec, startStatus(err))
	assert.Equal(t, exitCannotExec, startStatus(errors.New("exec format error")))
}

func TestExitStatus(t *testing.T) {
	err := exec.Command("sh", "-c", "exit 9").Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 9, exitStatus(ee.ProcessState))
	err = exec.Command("sh", "-c", "kill -TERM $$").Run()
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 128+15, exitStatus(ee.ProcessState))
}

// TestNodeNumbering: the command numbers nodes as the library does, from 0
// in the order of the list, in its messages about URLs and node errors.
func TestNodeNumbering(t *testing.T) {
	ne := &report.NodeError{Index: 2, Addr: "c:6379", Err: report.ErrNodeTimeout}
	var out strings.Builder
	describeNodeErrors(&out, fmt.Errorf("%w: %w", redlock.ErrNotAcquired, ne))
	assert.Equal(t, "  node 2 (c:6379): "+report.ErrNodeTimeout.Error()+"\n", out.String())
	assert.Contains(t, ne.Error(), "node 2 (c:6379)", "the library's own words")

	_, _, err := parseNode("", 2)
	assert.ErrorContains(t, err, "node URL 2 is empty")
}
