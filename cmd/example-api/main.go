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
	"github.com/idemkit/idem/internal/lambdaenv"
	"github.com/idemkit/idem/lambdawrap"
)

// defaultPort is the local HTTP port when PORT is unset.
const defaultPort = "3000"

// httpHandler is the shape of an HTTP API Lambda handler.
type httpHandler = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
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
	client, err := lambdaenv.DynamoDB(context.Background())
	if err != nil {
		return err
	}
	handler, err := newHandler(client, tables[0], tables[1], logger)
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

// newHandler wires the orders handler: the idempotency store on idemTable, a guard, and the
// HTTP API decorator that guards POST /orders by its Idempotency-Key header.
func newHandler(client *dynamodb.Client, idemTable, ordersTable string, logger *slog.Logger) (httpHandler, error) {
	store, err := dynamo.New(client, idemTable)
	if err != nil {
		return nil, err
	}
	guard, err := idem.New(store, idem.WithExpiry(24*time.Hour), idem.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	o := &orders{db: client, table: ordersTable, now: time.Now, logger: logger}
	return lambdawrap.HTTPAPI(guard, o.handle, lambdawrap.WithLogger(logger))
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
