package lambdawrap_test

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewShapeIsOneFile: a fifth HTTP event shape is one new file. The package's sources
// and testdata/newshape/lattice.go.txt, and nothing else, type-check as package
// lambdawrap. In the same package, the new decorator takes HTTP options and the options
// of its event type in one list, and refuses the options of another event type.
func TestNewShapeIsOneFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		code string
		want string // the type error names this option; "" when the code compiles
	}{
		{name: "HTTP and typed options in one list", code: `Lattice(g, h, WithMethods("PUT"),
			WithTenant(func(latticeRequest) string { return "" }), WithKeyRequired(false),
			WithFingerprintJMESPath[latticeRequest]("Body"))`},
		{name: "HTTP options of a list", code: `opts := []HTTPOption{WithHeader("X-Key"), nil}
			var lattice []LatticeOption
			for _, o := range opts {
				lattice = append(lattice, o)
			}
			Lattice(g, h, lattice...)`},
		{name: "tenant of another shape", want: "WithTenant", code: `Lattice(g, h, WithTenant(TenantREST))`},
		{name: "its tenant for another decorator", want: "WithTenant",
			code: `HTTPAPI(g, nil, WithTenant(func(latticeRequest) string { return "" }))`},
	}
	sources, err := filepath.Glob("*.go")
	require.NoError(t, err)
	pkg := map[string][]byte{}
	for _, name := range append(sources, filepath.Join("testdata", "newshape", "lattice.go.txt")) {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		pkg[name], err = os.ReadFile(name)
		require.NoError(t, err)
	}
	imp := exportImporter(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			use := "package lambdawrap\n\nimport (\n\t\"context\"\n\n\t\"github.com/idemkit/idem\"\n)\n\n" +
				"func use(g *idem.Guard, h func(context.Context, latticeRequest) (latticeResponse, error)) {\n" +
				tc.code + "\n}\n"
			fset := token.NewFileSet()
			var files []*ast.File
			for name, src := range pkg {
				f, err := parser.ParseFile(fset, name, src, 0)
				require.NoError(t, err)
				files = append(files, f)
			}
			f, err := parser.ParseFile(fset, "use.go", use, 0)
			require.NoError(t, err)
			files = append(files, f)
			var errs []error
			conf := types.Config{
				Importer: importer.ForCompiler(fset, "gc", imp.lookup),
				Error:    func(err error) { errs = append(errs, err) },
			}
			_, _ = conf.Check("github.com/idemkit/idem/lambdawrap", fset, files, nil)
			if tc.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, "exactly the misuse does not compile")
			var te types.Error
			require.ErrorAs(t, errs[0], &te)
			assert.Equal(t, "use.go", fset.Position(te.Pos).Filename, "the error is in the misuse: %v", te)
			assert.Contains(t, te.Msg, tc.want, "the error is about the option")
		})
	}
}
