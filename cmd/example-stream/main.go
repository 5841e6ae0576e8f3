// Command example-stream is an AWS Lambda function for a DynamoDB Streams event source
// mapping on the orders table (the one example-api writes) that adds each new order's
// amount to its SKU's sales in the ledger table exactly once. Each INSERT record's new
// image
//
//	{"id": "...", "sku": "sku-1", "quantity": 2, "amount_cents": 1000, ...}
//
// adds amount_cents to the balance of the ledger account "sales#<sku>" with a DynamoDB ADD,
// which by itself would count a record delivered again twice; idem keys each record by its
// eventID (package dynamostream's default) and commits the ADD together with the key's
// record, so each change is counted once. Other changes (MODIFY, REMOVE) have no effect.
// An invalid image fails its record, which (with the records after it of the same order)
// is reported as a batch item failure; Lambda retries from it, and after the mapping's
// retries sends it to the on-failure destination.
//
// Configuration comes from the environment: IDEMPOTENCY_TABLE and LEDGER_TABLE (required),
// AWS_REGION, and the SDK's AWS_ENDPOINT_URL_DYNAMODB for DynamoDB Local. Outside Lambda
// (no AWS_LAMBDA_RUNTIME_API) it reads one DynamoDB Streams event from the file named by its
// argument, or from standard input, processes it, and prints the DynamoDBEventResponse as
// JSON.
//
// It logs JSON lines to standard error, each with the invocation's requestId, at the level
// of AWS_LAMBDA_LOG_LEVEL (INFO by default): a summary line per batch and, at WARN, a line
// per failed record with its sequence number, never its key or image. idem's metrics go out
// in CloudWatch's Embedded Metric Format (DynamoDBStreams* batch metrics), one document per
// invocation: to standard output in Lambda, to standard error outside it.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/internal/lambdaenv"
)

func main() {
	logger := lambdaenv.Logger(os.Stderr)
	err := lambdaenv.RunBatch("example-stream", "DynamoDB Streams", logger, []string{"IDEMPOTENCY_TABLE", "LEDGER_TABLE"}, wire)
	if err != nil {
		fmt.Fprintln(os.Stderr, "example-stream:", err)
		os.Exit(1)
	}
}

// wire builds the handler from the container's client, tables, logger and metrics.
func wire(w lambdaenv.Wiring) (streamHandler, error) {
	h, err := newHandler(w.Client, w.Tables[0], w.Tables[1], w.Logger, w.Metrics)
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}

// streamHandler is the shape of a DynamoDB Streams Lambda handler that reports partial
// batch failures.
type streamHandler = func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// recordExpiry is how long a record's key is remembered: longer than a stream keeps a
// record (24 hours), so every delivery of it finds its key.
const recordExpiry = 2 * 24 * time.Hour

// newHandler wires the sales counter: the idempotency store on idemTable, a guard, and the
// DynamoDB Streams batch handler, which logs and reports its batches through the guard's
// logger and hooks (see [emf.Wrap] for flushing).
func newHandler(client *dynamodb.Client, idemTable, ledgerTable string, logger *slog.Logger, metrics *emf.Recorder) (*dynamostream.Handler, error) {
	store, err := dynamo.New(client, idemTable)
	if err != nil {
		return nil, err
	}
	guard, err := idem.New(store, "count-sale", idem.WithExpiry(recordExpiry), idem.WithLogger(logger), idem.WithHooks(metrics.Hooks()))
	if err != nil {
		return nil, err
	}
	s := &sales{table: ledgerTable, now: time.Now}
	return dynamostream.New(guard, s.count)
}
