package lambdawrap_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// misuseHeader starts each program of TestOptionMisuseDoesNotCompile: a payment handler
// and a key, and one handler per HTTP event shape.
const misuseHeader = `package misuse

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/lambdawrap"
)

type payment struct{ ID, Customer string }

var (
	g      *idem.Guard
	charge func(context.Context, payment) (string, error)
	key    lambdawrap.KeyFunc[payment]
	api    func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	rest   func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)
	alb    func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error)
)

func use() {
`

// TestOptionMisuseDoesNotCompile: the options that the decorators used to refuse when
// they were built (an HTTP option given to Wrap, a tenant or fingerprint function of
// another event type) are now type errors. Each program is type-checked against this
// package; the ones marked ok must compile, so the test cannot pass by breaking them all.
func TestOptionMisuseDoesNotCompile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		code string
		ok   bool   // compiles
		want string // else the type error names this option
	}{
		{name: "typed options for Wrap", ok: true, code: `lambdawrap.Wrap(g, charge, key,
			lambdawrap.WithTenant(func(p payment) string { return p.Customer }),
			lambdawrap.WithFingerprintJMESPath[payment]("ID"))`},
		{name: "optional key for Wrap", ok: true, code: `lambdawrap.Wrap(g, charge, lambdawrap.OptionalKey(key))`},
		{name: "HTTP and typed options for ALB", ok: true, code: `lambdawrap.ALB(g, alb, lambdawrap.WithMethods("PUT"),
			lambdawrap.WithTenant(func(events.ALBTargetGroupRequest) string { return "" }), lambdawrap.WithKeyRequired(false))`},
		{name: "HTTP options for every decorator", ok: true, code: `opts := []lambdawrap.HTTPOption{lambdawrap.WithHeader("X-Key")}
			var restOpts []lambdawrap.RESTOption
			for _, o := range opts { restOpts = append(restOpts, o) }
			lambdawrap.REST(g, rest, restOpts...)`},
		{name: "HTTP-only option for Wrap", want: "WithMethods", code: `lambdawrap.Wrap(g, charge, key, lambdawrap.WithMethods("POST"))`},
		{name: "header for Wrap", want: "WithHeader", code: `lambdawrap.Wrap(g, charge, key, lambdawrap.WithHeader("X-Key"))`},
		{name: "cacheable for Wrap", want: "WithCacheable", code: `lambdawrap.Wrap(g, charge, key, lambdawrap.WithCacheable(lambdawrap.DefaultCacheable))`},
		{name: "required key for Wrap", want: "WithKeyRequired", code: `lambdawrap.Wrap(g, charge, key, lambdawrap.WithKeyRequired(false))`},
		{name: "tenant of another type for Wrap", want: "WithTenant", code: `lambdawrap.Wrap(g, charge, key, lambdawrap.WithTenant(func(events.SQSMessage) string { return "" }))`},
		{name: "fingerprint of another type for Wrap", want: "WithFingerprint", code: `lambdawrap.Wrap(g, charge, key, lambdawrap.WithFingerprint(func(string) ([]byte, error) { return nil, nil }))`},
		{name: "JMESPath fingerprint of another type for Wrap", want: "WithFingerprintJMESPath", code: `lambdawrap.Wrap(g, charge, key, lambdawrap.WithFingerprintJMESPath[events.SQSMessage]("body"))`},
		{name: "tenant of another shape", want: "WithTenant", code: `lambdawrap.HTTPAPI(g, api, lambdawrap.WithTenant(lambdawrap.TenantREST))`},
		{name: "fingerprint of another shape", want: "WithFingerprint", code: `lambdawrap.ALB(g, alb, lambdawrap.WithFingerprint(func(events.APIGatewayV2HTTPRequest) ([]byte, error) { return nil, nil }))`},
		{name: "Wrap's option for an HTTP decorator", want: "WithTenant", code: `lambdawrap.REST(g, rest, lambdawrap.WithTenant(func(payment) string { return "" }))`},
	}
	imp := exportImporter(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "misuse.go", misuseHeader+tc.code+"\n}\n", 0)
			require.NoError(t, err)
			conf := types.Config{Importer: importer.ForCompiler(fset, "gc", imp.lookup)}
			_, err = conf.Check("misuse", fset, []*ast.File{f}, nil)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			var te types.Error
			require.ErrorAs(t, err, &te, "must not compile")
			assert.Greater(t, fset.Position(te.Pos).Line, strings.Count(misuseHeader, "\n"), "the error is in the misuse: %v", err)
			assert.Contains(t, te.Msg, "lambdawrap."+tc.want, "the error is about the option")
		})
	}
}

// exportImporter finds the compiler's export data of this package and its dependencies,
// as go vet does, so that programs using them can be type-checked.
type exportData map[string]string

func exportImporter(t *testing.T) exportData {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{if .Export}}{{.ImportPath}} {{.Export}}{{end}}",
		"github.com/idemkit/idem/lambdawrap", "github.com/aws/aws-lambda-go/events", "context")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	files := exportData{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, file, ok := strings.Cut(sc.Text(), " ")
		require.True(t, ok, "go list: %q", sc.Text())
		files[path] = file
	}
	return files
}

func (e exportData) lookup(path string) (io.ReadCloser, error) {
	file, ok := e[path]
	if !ok {
		return nil, os.ErrNotExist
	}
	return os.Open(file)
}
