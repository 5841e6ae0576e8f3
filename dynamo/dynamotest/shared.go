package dynamotest

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

// shared is the test binary's one DynamoDB Local, started by the first [Endpoint] call. It
// is package state on purpose: a JVM takes seconds to start, so every test of a binary
// shares one, and each test gets a table of its own ([NewTable]).
var shared struct {
	mu       sync.Mutex
	cfg      config // set by Main before any test runs
	started  bool
	server   *Server
	endpoint string
	err      error
}

// Main runs a test binary's tests; call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(dynamotest.Main(m)) }
//
// It is optional, and does three things for the binary's shared DynamoDB Local: it passes
// opts on to it, it fails the binary at once with the install instructions when Java or
// the jar is missing (rather than failing each test that asks for it), and it stops the JVM
// when the tests end. Without it, [Endpoint] uses the default search, and the JVM exits when
// the test binary does. Under -short, or with [EnvEndpoint] set, nothing is checked. Main
// returns the exit code for os.Exit.
func Main(m *testing.M, opts ...Option) int {
	flag.Parse()
	shared.mu.Lock()
	shared.cfg = newConfig(opts)
	cfg := shared.cfg
	shared.mu.Unlock()
	if !testing.Short() && os.Getenv(EnvEndpoint) == "" {
		if _, _, err := locate(cfg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	code := m.Run()
	if err := stopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}

func stopShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server == nil {
		return nil
	}
	return shared.server.Stop()
}

// Endpoint returns the URL of the test binary's DynamoDB: [EnvEndpoint] if set, else the
// shared DynamoDB Local on 127.0.0.1, started on the first call (in memory: every table is
// gone when it stops). It skips tb under -short, since the test then needs Java; if no
// endpoint can be had it fails tb with the reason, an error wrapping [ErrNotInstalled]
// when Java or the jar is missing. It is safe for concurrent use.
func Endpoint(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("dynamotest: DynamoDB Local test skipped under -short")
	}
	endpoint, err := sharedEndpoint()
	if err != nil {
		tb.Fatal(err)
	}
	return endpoint
}

// sharedEndpoint starts the shared instance once; a failed start is not retried.
func sharedEndpoint() (string, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started {
		shared.started = true
		if ep := os.Getenv(EnvEndpoint); ep != "" {
			shared.endpoint = ep
		} else {
			shared.server, shared.err = Start(context.Background(), func(c *config) { *c = shared.cfg })
			if shared.err == nil {
				shared.endpoint = shared.server.Endpoint()
			}
		}
	}
	return shared.endpoint, shared.err
}

// Client returns a new DynamoDB client for [Endpoint] (so it skips under -short).
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
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local", Source: "dynamotest"}, nil
		}),
		HTTPClient: httpClient,
	})
}

// NewStore returns a [dynamo.Store] over a new idempotency table of its own on [Endpoint]
// (so it skips under -short), made by [NewTable] with opts, which also go to [dynamo.New].
// The table is deleted when tb ends. It fails tb on error.
func NewStore(tb testing.TB, opts ...dynamo.Option) *dynamo.Store {
	tb.Helper()
	client := Client(tb)
	store, err := dynamo.New(client, NewTable(tb, client, opts...), opts...)
	if err != nil {
		tb.Fatalf("dynamotest: %v", err)
	}
	return store
}

// NewTable creates an idempotency table with a unique name through [dynamo.CreateTable],
// passing opts on so key and TTL attributes match the store's, and deletes it when tb ends.
// It returns the table's name and fails tb on error.
func NewTable(tb testing.TB, client *dynamodb.Client, opts ...dynamo.Option) string {
	tb.Helper()
	table := uniqueName("idem-test")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dynamo.CreateTable(ctx, client, table, opts...); err != nil {
		tb.Fatalf("dynamotest: create table %s: %v", table, err)
	}
	deleteOnCleanup(tb, client, table)
	return table
}

// CreateTable creates a table of the handler's own (an orders or payments table) from in,
// under in.TableName with a unique suffix, so that parallel tests sharing one DynamoDB Local
// never meet; it waits until the table is active, deletes it when tb ends, and returns its
// name. in is not modified. It fails tb on error.
func CreateTable(tb testing.TB, client *dynamodb.Client, in *dynamodb.CreateTableInput) string {
	tb.Helper()
	cp := *in
	cp.TableName = aws.String(uniqueName(aws.ToString(in.TableName)))
	if cp.BillingMode == "" && cp.ProvisionedThroughput == nil {
		cp.BillingMode = types.BillingModePayPerRequest
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.CreateTable(ctx, &cp); err != nil {
		tb.Fatalf("dynamotest: create table %s: %v", *cp.TableName, err)
	}
	deleteOnCleanup(tb, client, *cp.TableName)
	w := dynamodb.NewTableExistsWaiter(client)
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: cp.TableName}, 30*time.Second); err != nil {
		tb.Fatalf("dynamotest: create table %s: %v", *cp.TableName, err)
	}
	return *cp.TableName
}

func uniqueName(prefix string) string {
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	return prefix + "-" + hex.EncodeToString(suffix[:])
}

func deleteOnCleanup(tb testing.TB, client *dynamodb.Client, table string) {
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			tb.Errorf("dynamotest: delete table %s: %v", table, err)
		}
	})
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
		tb.Fatalf("dynamotest: describe TTL of %s: %v", table, err)
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
		tb.Fatalf("dynamotest: disable TTL on %s: %v", table, err)
	}
}
