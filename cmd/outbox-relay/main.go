// Command outbox-relay is the AWS Lambda function on the outbox table's stream: it
// publishes each event that a guarded handler committed with dynamo.WithOutboxTable to the
// SQS queue the event names (its Destination, a queue URL; FIFO queues get the ordering key
// as message group and the event id as deduplication id), at least once and in order per
// ordering key, with partial batch failures (package outbox/ddbrelay). Consumers
// deduplicate on the Idempotency-Key message attribute, the event id (package sqs does by
// default).
//
// Configuration comes from the environment: IDEMPOTENCY_TABLE (required: the relay's own
// records, under the name "outbox-relay", spare republishing the events before a failure
// that Lambda delivers again), AWS_REGION, and the SDK's AWS_ENDPOINT_URL_DYNAMODB and
// AWS_ENDPOINT_URL_SQS for local endpoints. It runs in Lambda only (AWS_LAMBDA_RUNTIME_API
// set); package outbox/ddbrelay's end-to-end test runs the same relay on DynamoDB Local.
//
// It logs JSON lines to standard error, at the level of AWS_LAMBDA_LOG_LEVEL: a summary
// line per batch and, at WARN, a line per event not published, with its sequence number.
// Metrics go out in CloudWatch's Embedded Metric Format on standard output, one document
// per invocation: the DynamoDBStreams* batch metrics and [LagMetric], the age of each
// batch's oldest record. The event source mapping's IteratorAge (AWS/Lambda) is the same
// lag as Lambda sees it.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/internal/lambdaenv"
)

func main() {
	logger := lambdaenv.Logger(os.Stderr)
	if err := run(logger); err != nil {
		fmt.Fprintln(os.Stderr, "outbox-relay:", err)
		os.Exit(1)
	}
}

func run(logger *slog.Logger) error {
	if !lambdaenv.InLambda() {
		return errors.New("runs in AWS Lambda only (AWS_LAMBDA_RUNTIME_API is not set)")
	}
	tables, err := lambdaenv.Require("IDEMPOTENCY_TABLE")
	if err != nil {
		return err
	}
	ctx := context.Background()
	// One client of each per container: created before the first invocation, reused by all.
	ddb, err := lambdaenv.DynamoDB(ctx, logger)
	if err != nil {
		return err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS configuration: %w", err)
	}
	// Metrics on standard output, where CloudWatch Logs extracts them.
	metrics, err := lambdaenv.Metrics(os.Stdout, "outbox-relay")
	if err != nil {
		return err
	}
	relay, err := newRelay(ddb, tables[0], sqs.NewFromConfig(cfg), logger, metrics)
	if err != nil {
		return err
	}
	lambda.Start(emf.Wrap(metrics, relay.Handle)) // one metrics document per invocation
	return nil
}
