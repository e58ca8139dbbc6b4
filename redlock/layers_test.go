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

// engine is the package's lower layer, in the order its files may depend
// on each other: each uses only the files before it (and internal/), and
// every other file of the package (the facade) may use all of them, never
// the reverse. docs/ARCHITECTURE.md explains the layers.
var engineFiles = []string{"clock.go", "gate.go", "quorum.go", "report.go", "clockguard.go", "pool.go", "round.go", "attempt.go"}

// TestLayers checks that the engine's files reach neither into the facade
// nor into engine files after them: no name declared at top level there
// (a type, function, variable or constant) is used in them, nor any method
// declared only there.
func TestLayers(t *testing.T) {
	files := parseFiles(t)
	for i, name := range engineFiles {
		f, ok := files[name]
		require.True(t, ok, "%s is missing", name)
		below := map[string]bool{}
		for _, lower := range engineFiles[:i+1] {
			for id := range declared(files[lower]) {
				below[id] = true
			}
		}
		above := map[string]string{} // name → the file that declares it
		for other, of := range files {
			if slices.Contains(engineFiles[:i+1], other) {
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
