package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/internal/ddblocal"
)

const (
	defaultTable = "idem_bench"
	// maxConns is the client's connection pool, above the 50 goroutines of W3.
	maxConns = 64
)

// setup says where the benchmark runs: a DynamoDB Local of its own, or the user's table.
type setup struct {
	endpoint string
	table    string
	own      bool // the user's endpoint or table: nothing is started
	// batchClaims is passed to sqs.WithBatchClaims.
	batchClaims bool
}

func (o setup) where() string {
	if o.endpoint != "" {
		return o.endpoint
	}
	return "AWS (the default credential chain and region)"
}

// env is what a run holds open.
type env struct {
	server *ddblocal.Server
	client *dynamodb.Client
	guard  *idem.Guard
	cnt    *counters
	pid    int
}

// open starts DynamoDB Local unless the user named an endpoint or table, builds the one
// client with the counting middleware, creates the table and the guard.
func (o setup) open(ctx context.Context) (*env, error) {
	e := &env{cnt: newCounters()}
	endpoint := o.endpoint
	if !o.own {
		srv, err := ddblocal.Start(ctx)
		if err != nil {
			return nil, err
		}
		e.server, e.pid, endpoint = srv, srv.PID(), srv.Endpoint()
	}
	client, err := o.client(ctx, endpoint, e.cnt)
	if err != nil {
		e.close(io.Discard)
		return nil, err
	}
	e.client = client
	if err := dynamo.CreateTable(ctx, client, o.table); err != nil {
		e.close(io.Discard)
		return nil, err
	}
	store, err := dynamo.New(client, o.table)
	if err != nil {
		e.close(io.Discard)
		return nil, err
	}
	// Cache and payload validation stay off (their defaults; validation is off because no
	// request carries a fingerprint); the lease is the remaining time of each context's
	// deadline, without margin.
	e.guard, err = idem.New(store, "bench", idem.WithExpiry(expiry), idem.WithScope(scope), idem.WithLeaseMargin(0))
	if err != nil {
		e.close(io.Discard)
		return nil, err
	}
	return e, nil
}

// client returns the one DynamoDB client: keep-alive connections (maxConns), the SDK's
// default retries, and the counters in its middleware stack.
func (o setup) client(ctx context.Context, endpoint string, cnt *counters) (*dynamodb.Client, error) {
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = maxConns
		t.MaxIdleConnsPerHost = maxConns
		t.IdleConnTimeout = time.Minute
	})
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient),
		config.WithAPIOptions([]func(*middleware.Stack) error{cnt.apiOption}),
	}
	if !o.own {
		// DynamoDB Local only checks that requests are signed. It sends a CRC32 header of 0
		// on some error responses, which the SDK (validating it, as by default) would log as
		// a warning on every conditional-check failure; those logs are dropped.
		opts = append(opts, config.WithRegion("us-east-1"), config.WithLogger(logging.Nop{}),
			config.WithCredentialsProvider(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local", Source: "idem-bench"}, nil
			})))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("idem-bench: load AWS config: %w", err)
	}
	return dynamodb.NewFromConfig(cfg, func(opt *dynamodb.Options) {
		if endpoint != "" {
			opt.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

// close stops DynamoDB Local if this run started it.
func (e *env) close(stderr io.Writer) {
	if e.server == nil {
		return
	}
	if err := e.server.Stop(); err != nil {
		fmt.Fprintln(stderr, err)
	}
}
