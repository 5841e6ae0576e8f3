// Command example-sqs is an AWS Lambda function for an SQS event source mapping that
// credits account balances exactly once per message. Each message body
//
//	{"account_id": "acct-1", "amount_cents": 1000}
//
// adds amount_cents to the account's balance in the ledger table with a DynamoDB ADD,
// which by itself would count a redelivered or duplicate message twice; idem keys each
// message (by its Idempotency-Key message attribute, else its message ID) and commits the
// ADD together with the key's record, so each key is credited once. Invalid bodies are
// reported as batch item failures, for the queue's redrive policy to move to its DLQ.
//
// Configuration comes from the environment: IDEMPOTENCY_TABLE and LEDGER_TABLE (required),
// AWS_REGION, and the SDK's AWS_ENDPOINT_URL_DYNAMODB for DynamoDB Local. Outside Lambda
// (no AWS_LAMBDA_RUNTIME_API) it reads one SQS event from the file named by its argument,
// or from standard input, processes it, and prints the SQSEventResponse as JSON.
//
// It logs JSON lines to standard error, each with the invocation's requestId, at the level
// of AWS_LAMBDA_LOG_LEVEL (INFO by default): a summary line per batch, with its failures
// counted by reason, and at WARN a line per failed message with its message ID and reason,
// never its key or body. idem's metrics go out in CloudWatch's Embedded Metric Format, one
// document per invocation: to standard output in Lambda, to standard error outside it,
// where standard output carries the response.
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
	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/internal/lambdaenv"
	"github.com/idemkit/idem/sqs"
)

func main() {
	logger := lambdaenv.Logger(os.Stderr)
	err := lambdaenv.RunBatch("example-sqs", "SQS", logger, []string{"IDEMPOTENCY_TABLE", "LEDGER_TABLE"}, wire)
	if err != nil {
		fmt.Fprintln(os.Stderr, "example-sqs:", err)
		os.Exit(1)
	}
}

// wire builds the handler from the container's client, tables, logger and metrics.
func wire(w lambdaenv.Wiring) (sqsHandler, error) {
	h, err := newHandler(w.Client, w.Tables[0], w.Tables[1], w.Logger, w.Metrics)
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}

// sqsHandler is the shape of an SQS Lambda handler that reports partial batch failures.
type sqsHandler = func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// newHandler wires the ledger: the idempotency store on idemTable, a guard, and the SQS
// batch handler, which logs and reports its batches through the guard's logger and hooks,
// so the guard's hooks feed every metric (see [emf.Wrap] for flushing).
func newHandler(client *dynamodb.Client, idemTable, ledgerTable string, logger *slog.Logger, metrics *emf.Recorder) (*sqs.Handler, error) {
	store, err := dynamo.New(client, idemTable)
	if err != nil {
		return nil, err
	}
	// A message can be redelivered for as long as the queue keeps it (4 days by default),
	// so its key must be remembered at least as long.
	guard, err := idem.New(store, "credit-account", idem.WithExpiry(5*24*time.Hour), idem.WithLogger(logger), idem.WithHooks(metrics.Hooks()))
	if err != nil {
		return nil, err
	}
	l := &ledger{table: ledgerTable, now: time.Now}
	return sqs.New(guard, l.credit) // logs and reports its batches through the guard
}
