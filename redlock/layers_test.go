package redlock

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The facade's files in layers, lowest first: a file uses only the files
// of its own layer and of the layers below it (and the packages under it).
// Every non-test file is in exactly one layer. docs/ARCHITECTURE.md
// explains the layers; the packages under the facade are kept apart by
// the compiler and TestPackageImports.
var (
	layers = [][]string{
		// What the facade hands the engine and takes back: errors, the
		// Observer, options, features, capabilities, the audit, fencing.
		{"errors.go", "quorum.go", "clock.go", "observer.go", "logger.go", "options.go", "audit.go", "audit_judge.go", "fence.go"},
		// The primitives and the public API.
		{"lockkind.go", "mutex.go", "shared.go", "rwmutex.go", "semaphore.go", "multi.go", "do.go", "locker.go",
			"wait.go", "redlock.go", "pool.go", "inspect.go", "doc.go"},
	}
)

// TestLayers checks that no file reaches into a layer above its own: no
// name declared at top level there (a type, function, variable or
// constant) is used in it, nor any method declared only there.
func TestLayers(t *testing.T) {
	files := parseFiles(t)
	var listed []string
	for _, l := range layers {
		listed = append(listed, l...)
	}
	for name := range files {
		assert.Equal(t, 1, count(listed, name), "%s is in %d layers, not one", name, count(listed, name))
	}
	for li, layer := range layers {
		var upTo []string // the files a file of this layer may use
		for _, l := range layers[:li+1] {
			upTo = append(upTo, l...)
		}
		for _, name := range layer {
			allowed := upTo
			f, ok := files[name]
			require.True(t, ok, "%s is missing", name)
			checkUses(t, files, name, f, allowed)
		}
	}
}

// checkUses fails for each name f uses that only a file outside allowed
// declares.
func checkUses(t *testing.T, files map[string]*ast.File, name string, f *ast.File, allowed []string) {
	t.Helper()
	below := map[string]bool{}
	for _, lower := range allowed {
		for id := range declared(files[lower]) {
			below[id] = true
		}
	}
	above := map[string]string{} // name → the file that declares it
	for other, of := range files {
		if slices.Contains(allowed, other) {
			continue
		}
		for id := range declared(of) {
			if !below[id] {
				above[id] = other
			}
		}
	}
	for _, use := range uses(f) {
		if from, ok := above[use]; ok {
			assert.Failf(t, "layering", "%s uses %s, declared in %s above it", name, use, from)
		}
	}
}

// count is how many times s holds x.
func count(s []string, x string) int {
	n := 0
	for _, y := range s {
		if y == x {
			n++
		}
	}
	return n
}

// parseFiles parses the package's non-test files.
func parseFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		files[name] = f
	}
	return files
}

// declared returns the names a file declares at top level, its methods'
// names and the methods its interfaces ask for.
func declared(f *ast.File) map[string]bool {
	out := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			out[d.Name.Name] = true
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					out[s.Name.Name] = true
					if it, ok := s.Type.(*ast.InterfaceType); ok {
						for _, m := range it.Methods.List {
							for _, n := range m.Names {
								out[n.Name] = true // a method the file's interface asks for
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						out[n.Name] = true
					}
				}
			}
		}
	}
	return out
}

// uses returns the names a file takes from elsewhere in the package: the
// identifiers the parser could not resolve within the file, and the
// names of the unexported methods it calls.
func uses(f *ast.File) []string {
	var out []string
	for _, id := range f.Unresolved {
		out = append(out, id.Name)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			// Exported method names are everywhere (Lock, Done, Err):
			// the package's own methods are the unexported ones.
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && !sel.Sel.IsExported() {
				out = append(out, sel.Sel.Name)
			}
		}
		return true
	})
	return out
}
