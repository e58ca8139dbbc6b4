package redlock_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// TestDocSnippets keeps the documentation's Go code compiling: every ```go
// block of the top-level *.md files and of docs/*.md but whole programs
// (those that start with `package main`, which integration's
// TestQuickStartAsPasted pastes into a module and runs) must be a copy of
// consecutive lines of a test file of this package, redlockotel, redlockrueidis or redlockvalkey
// (spaces at either end of a line aside), which go test compiles, and whose
// examples it runs. Change a snippet by changing the example it is copied
// from, then copying it again.
func TestDocSnippets(t *testing.T) {
	var sources [][]string
	for _, pattern := range []string{"*_test.go", "../redlockotel/*_test.go", "../redlockrueidis/*_test.go", "../redlockvalkey/*_test.go"} {
		files, err := filepath.Glob(pattern)
		require.NoError(t, err)
		for _, f := range files {
			sources = append(sources, trimmedLines(t, f))
		}
	}
	require.NotEmpty(t, sources)

	var docs []string
	for _, pattern := range []string{"../*.md", "../docs/*.md"} {
		files, err := filepath.Glob(pattern)
		require.NoError(t, err)
		docs = append(docs, files...)
	}
	found := 0
	for _, doc := range docs {
		for _, b := range goBlocks(t, doc) {
			found++
			if len(b.lines) > 0 && b.lines[0] == "package main" {
				continue // a whole program: integration's TestQuickStartAsPasted runs it as it stands
			}
			if !holdsBlock(sources, b.lines) {
				t.Errorf("%s:%d: this ```go block is not a copy of lines of a test file in redlock/ or "+
					"redlockotel/: copy it from an example there (or put it into one), so that it compiles", doc, b.line)
			}
		}
	}
	// The README alone has several: finding none means the parsing broke.
	assert.Greater(t, found, 10, "```go blocks found in %d documents", len(docs))
}

// A block is one ```go block: its first line's number and its lines.
type block struct {
	line  int
	lines []string
}

// goBlocks returns the ```go blocks of a Markdown file, their lines trimmed.
func goBlocks(t *testing.T, path string) []block {
	t.Helper()
	lines := trimmedLines(t, path)
	var out []block
	var cur *block
	for i, l := range lines {
		switch {
		case cur == nil && l == "```go":
			cur = &block{line: i + 2}
		case cur != nil && l == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, l)
		}
	}
	require.Nil(t, cur, "%s: a ```go block is not closed", path)
	return out
}

// holdsBlock reports whether some source holds want as consecutive lines.
func holdsBlock(sources [][]string, want []string) bool {
	for _, src := range sources {
		for i := 0; i+len(want) <= len(src); i++ {
			match := true
			for j, w := range want {
				if src[i+j] != w {
					match = false
					break
				}
			}
			if match {
				return true
			}
		}
	}
	return false
}

func trimmedLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		lines = append(lines, strings.TrimSpace(s.Text()))
	}
	require.NoError(t, s.Err())
	return lines
}

// TestQuickStartExtends runs the README's quick start with a TTL short
// enough that its steps need extensions: they must succeed, and the lock
// must never be lost.
func TestQuickStartExtends(t *testing.T) {
	addrs, stop := servers(3)
	t.Cleanup(stop)
	obs := &extendCounter{}
	rl, closeAll := newRedlock(addrs, redlock.WithTTL(1500*time.Millisecond), redlock.WithObserver(obs))
	t.Cleanup(closeAll)

	// Five steps of 300 ms outlast the TTL: the validity falls below a
	// second before the third step and again before the fifth.
	var steps []func()
	for range 5 {
		steps = append(steps, func() { time.Sleep(300 * time.Millisecond) })
	}
	// A context that ends before the steps do would fail the extensions
	// (the quick start once reused Lock's 5 s context for them).
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	assert.NoError(t, processInvoice(ctx, rl, steps))
	assert.Equal(t, int64(2), obs.extended.Load(), "extensions that succeeded")
	assert.Zero(t, obs.failed.Load(), "extensions that failed")
	assert.Zero(t, obs.lost.Load(), "acquisitions lost")
}

// extendCounter counts extensions and lost acquisitions.
type extendCounter struct{ extended, failed, lost atomic.Int64 }

func (c *extendCounter) OpStart(ctx context.Context, _ report.Op) context.Context { return ctx }

func (c *extendCounter) OpEnd(_ context.Context, op report.Op, res report.OpResult) {
	switch {
	case op.Kind != report.OpExtend:
	case res.Err == nil:
		c.extended.Add(1)
	default:
		c.failed.Add(1)
	}
}

func (c *extendCounter) LeaseEnd(h report.Lease) {
	if h.Lost {
		c.lost.Add(1)
	}
}

func (c *extendCounter) NodeFailed(context.Context, *report.NodeError) {}
