// Command example-api is an AWS Lambda function behind an API Gateway HTTP API (payload
// format 2.0) that creates orders exactly once per Idempotency-Key:
//
//	POST /orders       {"sku": "...", "quantity": 1, "amount_cents": 1250}  → 201 + the order
//	GET  /orders/{id}  → 200 + the order, or 404
//
// When DynamoDB fails, both answer 503 with Retry-After.
//
// A retried POST with the same key and body gets the first response back, with
// "Idempotent-Replayed: true", and no second order; the order row commits in one
// transaction with its idempotency record.
//
// Configuration comes from the environment: IDEMPOTENCY_TABLE and ORDERS_TABLE (required),
// AWS_REGION, and the SDK's AWS_ENDPOINT_URL_DYNAMODB for DynamoDB Local. Outside Lambda
// (no AWS_LAMBDA_RUNTIME_API) it serves HTTP on 127.0.0.1:$PORT (default 3000) until
// interrupted.
//
// It logs JSON lines to standard error, each with the invocation's requestId, at the level
// of AWS_LAMBDA_LOG_LEVEL (INFO by default), and writes idem's metrics to standard output
// in CloudWatch's Embedded Metric Format, one document per invocation.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/internal/lambdaenv"
	"github.com/idemkit/idem/lambdawrap"
)

// defaultPort is the local HTTP port when PORT is unset.
const defaultPort = "3000"

// httpHandler is the shape of an HTTP API Lambda handler.
type httpHandler = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

func main() {
	logger := lambdaenv.Logger(os.Stderr)
	if err := run(logger); err != nil {
		fmt.Fprintln(os.Stderr, "example-api:", err)
		os.Exit(1)
	}
}

func run(logger *slog.Logger) error {
	tables, err := lambdaenv.Require("IDEMPOTENCY_TABLE", "ORDERS_TABLE")
	if err != nil {
		return err
	}
	// One client per container: created before the first invocation and reused by all.
	client, err := lambdaenv.DynamoDB(context.Background(), logger)
	if err != nil {
		return err
	}
	metrics, err := lambdaenv.Metrics(os.Stdout, "example-api")
	if err != nil {
		return err
	}
	handler, err := newHandler(client, tables[0], tables[1], logger, metrics)
	if err != nil {
		return err
	}
	if lambdaenv.InLambda() {
		lambda.Start(handler)
		return nil
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = defaultPort
	}
	return serve(net.JoinHostPort("127.0.0.1", port), lambdawrap.LocalHandler(handler), logger)
}

// newHandler wires the orders handler: the idempotency store on idemTable, a guard whose
// hooks feed metrics, and the HTTP API decorator that guards POST /orders by its
// Idempotency-Key header; metrics are flushed after every invocation.
func newHandler(client *dynamodb.Client, idemTable, ordersTable string, logger *slog.Logger, metrics *emf.Recorder) (httpHandler, error) {
	store, err := dynamo.New(client, idemTable)
	if err != nil {
		return nil, err
	}
	guard, err := idem.New(store, "create-order", idem.WithExpiry(24*time.Hour), idem.WithLogger(logger), idem.WithHooks(metrics.Hooks()))
	if err != nil {
		return nil, err
	}
	o := &orders{db: client, table: ordersTable, now: time.Now, logger: logger}
	h, err := lambdawrap.HTTPAPI(guard, o.handle) // logs through the guard's logger
	if err != nil {
		return nil, err
	}
	return emf.Wrap(metrics, h), nil
}

// serve runs the local HTTP server on addr until SIGINT or SIGTERM, then shuts it down.
func serve(addr string, h http.Handler, logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	logger.Info("example-api: listening", "url", "http://"+ln.Addr().String())
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), lambdawrap.LocalTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
