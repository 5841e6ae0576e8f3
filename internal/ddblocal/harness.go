package ddblocal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/dynamo"
)

// shared is the one instance of a test binary, started on first use by [Endpoint].
var shared struct {
	once     sync.Once
	server   *Server
	endpoint string
	err      error
}

// EnvRequire, when set (make test sets it), turns -short from a reason to skip the DynamoDB
// Local tests into an error: a run that must include them cannot leave them out unseen.
const EnvRequire = "IDEM_REQUIRE_DYNAMODB"

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

// Main runs a test binary's tests with a shared DynamoDB Local; call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }
//
// Unless -short is set or DYNAMODB_ENDPOINT names an endpoint, it first checks that Java and
// the jar are installed and, if not, fails the binary with a message naming `make deps`:
// integration tests never skip silently. With [EnvRequire] set, -short fails it too. The JVM starts when a test first asks for it and is
// killed when the tests end. Main returns the exit code for os.Exit.
func Main(m *testing.M) int {
	flag.Parse()
	if testing.Short() && os.Getenv(EnvRequire) != "" {
		fmt.Fprintf(os.Stderr, "ddblocal: -short would skip the DynamoDB Local tests, but %s is set: run without -short\n", EnvRequire)
		return 1
	}
	if !testing.Short() && os.Getenv(EnvEndpoint) == "" {
		if _, _, err := locate(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	code := m.Run()
	if shared.server != nil {
		if err := shared.server.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return code
}

// Endpoint returns the URL of the test binary's DynamoDB: DYNAMODB_ENDPOINT if set, else the
// shared DynamoDB Local, started on the first call. Under -short it skips tb (see
// [SkipShort]); if the endpoint cannot be had it fails tb. It is safe for concurrent use.
func Endpoint(tb testing.TB) string {
	tb.Helper()
	SkipShort(tb)
	shared.once.Do(func() {
		if ep := os.Getenv(EnvEndpoint); ep != "" {
			shared.endpoint = ep
			return
		}
		shared.server, shared.err = Start(context.Background())
		if shared.err == nil {
			shared.endpoint = shared.server.Endpoint()
		}
	})
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.endpoint
}

// Client returns a DynamoDB client for [Endpoint] (so it skips under -short). Each call
// returns a new client.
func Client(tb testing.TB) *dynamodb.Client {
	tb.Helper()
	return NewClient(Endpoint(tb))
}

// NewClient returns a DynamoDB client for a local endpoint: region us-east-1, static dummy
// credentials (DynamoDB Local checks only that requests are signed), and an HTTP client that
// keeps enough idle connections for parallel tests and benchmarks.
func NewClient(endpoint string) *dynamodb.Client {
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = 256
		t.MaxIdleConnsPerHost = 256
		t.IdleConnTimeout = time.Minute
	})
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local", Source: "ddblocal"}, nil
		}),
		HTTPClient: httpClient,
	})
}

// NewTable creates an idempotency table with a unique name through [dynamo.CreateTable],
// passing opts on so key and TTL attributes match the store's, and deletes it when tb ends.
// It fails tb on error.
func NewTable(tb testing.TB, client *dynamodb.Client, opts ...dynamo.Option) string {
	tb.Helper()
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	table := "idem-test-" + hex.EncodeToString(suffix[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dynamo.CreateTable(ctx, client, table, opts...); err != nil {
		tb.Fatalf("ddblocal: create table %s: %v", table, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			tb.Errorf("ddblocal: delete table %s: %v", table, err)
		}
	})
	return table
}

// DisableTTL turns off TTL on table. DynamoDB Local deletes expired items within seconds,
// unlike DynamoDB (which takes up to days), so tests whose clock lies in the past, or that
// need an expired record to linger as it would in AWS, switch it off. It fails tb on error.
func DisableTTL(tb testing.TB, client *dynamodb.Client, table string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		tb.Fatalf("ddblocal: describe TTL of %s: %v", table, err)
	}
	d := out.TimeToLiveDescription
	if d == nil || d.AttributeName == nil || d.TimeToLiveStatus == types.TimeToLiveStatusDisabled {
		return
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: d.AttributeName, Enabled: aws.Bool(false)},
	})
	if err != nil {
		tb.Fatalf("ddblocal: disable TTL on %s: %v", table, err)
	}
}
