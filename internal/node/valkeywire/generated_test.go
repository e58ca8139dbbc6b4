package valkeywire

import (
	"flag"
	"go/format"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The valkey-go transport and package redlockvalkey are generated from
// the rueidis ones (valkey-go is rueidis' fork, with the same API under
// other names): one statement of each, whatever the client. go generate
// (below) writes them; TestGenerated fails when a file differs from what
// its source makes, or a source has no copy.
//
//go:generate go test -run TestGenerated -update

var update = flag.Bool("update", false, "write the generated files instead of checking them")

// generated are the directories whose Go files are made from another's,
// relative to this one: source, copy.
var generated = [][2]string{
	{"../rueidiswire", "."},
	{"../../../redlockrueidis", "../../../redlockvalkey"},
}

// TestGenerated checks (or, with -update, writes) every generated file.
func TestGenerated(t *testing.T) {
	for _, dirs := range generated {
		sources, err := filepath.Glob(filepath.Join(dirs[0], "*.go"))
		require.NoError(t, err)
		require.NotEmpty(t, sources)
		for _, src := range sources {
			text, err := os.ReadFile(src)
			require.NoError(t, err)
			name := strings.ReplaceAll(filepath.Base(src), "rueidis", "valkey")
			dst := filepath.Join(dirs[1], name)
			want, err := format.Source([]byte(toValkey(string(text), filepath.ToSlash(filepath.Join("internal/node/valkeywire", src)))))
			require.NoError(t, err, "%s's copy", src)
			if *update {
				require.NoError(t, os.WriteFile(dst, want, 0o644))
				continue
			}
			got, err := os.ReadFile(dst)
			if assert.NoError(t, err, "%s has no copy: go generate ./internal/node/valkeywire", src) {
				assert.Equal(t, string(want), string(got), "%s is not what %s makes: go generate ./internal/node/valkeywire", dst, src)
			}
		}
	}
}

// toValkey is the valkey-go form of a rueidis file from src.
func toValkey(text, src string) string {
	r := strings.NewReplacer(
		`"github.com/redis/rueidis"`, `valkey "github.com/valkey-io/valkey-go"`,
		"github.com/redis/rueidis", "github.com/valkey-io/valkey-go",
		"rueidiswire", "valkeywire",
		"redlockrueidis", "redlockvalkey",
		"rueidis.", "valkey.",
		"RedisMessage", "ValkeyMessage",
		"RedisResult", "ValkeyResult",
		"IsRedisNil", "IsValkeyNil",
		"IsRedisErr", "IsValkeyErr",
		"Rueidis", "Valkey",
		"rueidis", "valkey-go",
	)
	header := "// Code generated from " + strings.TrimPrefix(filepath.Clean(src), "../") +
		" by go generate ./internal/node/valkeywire; DO NOT EDIT.\n\n"
	return header + r.Replace(text)
}
