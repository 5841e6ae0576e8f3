package idem

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemstore"
)

// TestErrorKindsCoverEverySentinel: every exported Err* variable of package idem and
// package idemstore has a row in errorKinds. A new sentinel in no row fails here: decide
// whether storeErr keeps it as it is and whether a completion that failed with it is sent
// again. The sentinels are found in the source, so a new one needs no other list.
func TestErrorKindsCoverEverySentinel(t *testing.T) {
	t.Parallel()
	declared := map[string]string{} // sentinel → the sentinel it names (itself unless an alias)
	for pkg, dir := range map[string]string{"idem": ".", "idemstore": "idemstore"} {
		for name, target := range sentinelsDeclared(t, pkg, dir) {
			declared[name] = target
		}
	}
	require.Contains(t, declared, "idem.ErrStore", "the parser found no sentinels")
	require.Contains(t, declared, "idemstore.ErrNotCommitted", "the parser found no sentinels")

	inTable := map[string]bool{}
	for _, name := range errorKindRows(t) {
		inTable[canonical(declared, name)] = true
	}
	var missing []string
	for name := range declared {
		if !inTable[canonical(declared, name)] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "sentinels in no row of errorKinds (errors.go)")
	assert.Len(t, errorKinds, len(inTable), "one row per sentinel")
}

// canonical follows aliases (idem.ErrLeaseLost = idemstore.ErrLeaseLost) to the
// sentinel's own name.
func canonical(declared map[string]string, name string) string {
	for range 4 {
		next, ok := declared[name]
		if !ok || next == name {
			return name
		}
		name = next
	}
	return name
}

// sentinelsDeclared parses the non-test files of dir, package pkg, and returns its
// exported package-level variables named Err*, each with the sentinel it is an alias of
// (an initialiser such as idemstore.ErrLeaseLost), or itself.
func sentinelsDeclared(t *testing.T, pkg, dir string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !id.IsExported() || !strings.HasPrefix(id.Name, "Err") {
						continue
					}
					name := pkg + "." + id.Name
					out[name] = name
					if i < len(vs.Values) {
						if ref, ok := sentinelRef(pkg, vs.Values[i]); ok {
							out[name] = ref
						}
					}
				}
			}
		}
	}
	return out
}

// sentinelRef returns the qualified name of the Err* variable e names, if it names one.
func sentinelRef(pkg string, e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.Ident:
		if strings.HasPrefix(e.Name, "Err") {
			return pkg + "." + e.Name, true
		}
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && strings.HasPrefix(e.Sel.Name, "Err") {
			return x.Name + "." + e.Sel.Name, true
		}
	}
	return "", false
}

// errorKindRows returns the sentinels named in the rows of errorKinds, as written in
// errors.go.
func errorKindRows(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("errors.go")
	require.NoError(t, err)
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", src, parser.SkipObjectResolution)
	require.NoError(t, err)
	var rows []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "errorKinds" || len(vs.Values) != 1 {
			return true
		}
		table, ok := vs.Values[0].(*ast.CompositeLit)
		require.True(t, ok, "errorKinds is a composite literal")
		for _, elt := range table.Elts {
			row, ok := elt.(*ast.CompositeLit)
			require.True(t, ok, "a row of errorKinds is a composite literal")
			require.NotEmpty(t, row.Elts)
			ref, ok := sentinelRef("idem", row.Elts[0])
			require.True(t, ok, "a row of errorKinds starts with a sentinel")
			rows = append(rows, ref)
		}
		return false
	})
	require.NotEmpty(t, rows, "errorKinds not found in errors.go")
	return rows
}

// TestErrorKindsKeepBehaviour pins what the table decides, for every store-side sentinel
// and for a plain store failure: which errors storeErr passes on as they are, and which
// completion failures are not sent again.
func TestErrorKindsKeepBehaviour(t *testing.T) {
	t.Parallel()
	plain := errors.New("connection reset")
	tests := []struct {
		name             string
		err              error
		keptAsIs, resent bool
	}{
		{name: "store failure", err: plain, resent: true},
		{name: "ErrStore", err: &StoreError{Op: "complete", Err: plain}, keptAsIs: true, resent: true},
		{name: "ErrLeaseLost", err: ErrLeaseLost, keptAsIs: true},
		{name: "ErrConditionFailed", err: ErrConditionFailed, keptAsIs: true},
		{name: "ErrTooLarge", err: idemstore.ErrTooLarge, keptAsIs: true},
		{name: "ErrIncompatibleRecord", err: ErrIncompatibleRecord, keptAsIs: true},
		{name: "ErrNotCommitted", err: idemstore.ErrNotCommitted},
		{name: "ErrNotCommitted in a StoreError", err: &StoreError{Op: "complete", Err: idemstore.ErrNotCommitted}, keptAsIs: true},
		{name: "ErrInvalidAttach", err: idemstore.ErrInvalidAttach, resent: true},
		{name: "ErrInProgress", err: ErrInProgress, resent: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := fmt.Errorf("store: %w", tc.err)
			got := storeErr("complete", err)
			if tc.keptAsIs {
				assert.Same(t, err, got, "kept as it is")
			} else {
				var se *StoreError
				require.ErrorAs(t, got, &se, "wrapped in a StoreError")
				assert.Same(t, err, se.Err)
			}
			assert.Equal(t, tc.resent, resendable(err), "resendable")
		})
	}
}
