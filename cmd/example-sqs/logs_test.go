package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/jsonlines"
	"github.com/idemkit/idem/internal/lambdaenv"
	"github.com/idemkit/idem/internal/proctest"
)

// TestOperatorView wires the function as main does (client, logger and metrics from the
// environment), delivers the fixture twice through the Lambda runtime's handler path, and
// reads what an operator reads: JSON log lines that each carry the invocation's request ID,
// say which message failed (its ID and stored key) and why, and never show a caller's key,
// a body or the SDK's checksum warning; and one metrics document per invocation. The
// function's name scopes its stored keys.
func TestOperatorView(t *testing.T) {
	endpoint := ddblocal.Endpoint(t)
	proctest.Setenv(t, endpoint)
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "example-sqs")
	first, err := os.ReadFile(filepath.Join("testdata", "sqs-credits-with-duplicates.json"))
	require.NoError(t, err)
	// SQS counts deliveries: the redelivery takes the per-message path, whose replays are
	// conditional writes that DynamoDB Local refuses with an error response.
	redelivery := bytes.ReplaceAll(first, []byte(`"ApproximateReceiveCount": "1"`), []byte(`"ApproximateReceiveCount": "2"`))
	require.NotEqual(t, first, redelivery)

	for _, level := range []string{"", "WARN"} { // INFO by default, and WARN
		t.Run("level "+level, func(t *testing.T) {
			t.Setenv(lambdaenv.LogLevelVar, level)
			var logs, metricsOut bytes.Buffer
			logger := lambdaenv.Logger(&logs)
			client, err := lambdaenv.DynamoDB(context.Background(), logger)
			require.NoError(t, err)
			idemTable, ledgerTable := ledgerTables(t, client)
			metrics, err := lambdaenv.Metrics(&metricsOut, "example-sqs")
			require.NoError(t, err)
			h, err := newHandler(client, idemTable, ledgerTable, logger, metrics)
			require.NoError(t, err)
			invoke := lambda.NewHandler(emf.Wrap(metrics, h.Handle))

			requests := []string{"req-first", "req-redelivery"}
			for i, payload := range [][]byte{first, redelivery} {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: requests[i]})
				_, err := invoke.Invoke(ctx, payload)
				cancel()
				require.NoError(t, err)
			}

			for _, secret := range []string{"transfer-700", "acct-", "checksum", "failed to close"} {
				assert.NotContains(t, logs.String(), secret)
			}
			lines := jsonlines.Parse(t, logs.Bytes())
			require.Len(t, lines, 2*len(requests), "per invocation: the failed message, the summary\n%s", logs.String())
			for i, l := range lines {
				assert.Equal(t, requests[i/2], l[lambdaenv.RequestIDKey], "line %d", i)
				assert.Equal(t, "WARN", l["level"], "line %d", i)
				if i%2 == 0 {
					assert.Equal(t, "sqs: message failed", l["message"])
					assert.Equal(t, invalidMessageID, l["message_id"])
					assert.Equal(t, "handler", l["reason"])
					assert.Regexp(t, `^example-sqs\.credit-account#[0-9a-f]{64}$`, l["stored_key"], "the stored key, as idemctl takes it")
				} else {
					assert.Equal(t, "sqs: batch processed", l["message"])
					assert.Equal(t, map[string]any{"handler": 1.0}, l["failed_by"])
				}
			}

			out, err := client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(idemTable)})
			require.NoError(t, err)
			require.NotEmpty(t, out.Items)
			for _, item := range out.Items {
				id, ok := item["id"].(*types.AttributeValueMemberS)
				require.True(t, ok, "a string id")
				assert.Regexp(t, `^example-sqs\.credit-account#[0-9a-f]{64}$`, id.Value)
			}

			docs := jsonlines.Parse(t, metricsOut.Bytes())
			require.Len(t, docs, len(requests), "one metrics document per invocation")
			for i, want := range []map[string]float64{
				{emf.MetricSQSRan: 2, emf.MetricSQSDuplicates: 1, emf.MetricSQSFailed: 1, "SQSFailedHandler": 1, emf.MetricClaims: 3},
				{emf.MetricSQSReplayed: 2, emf.MetricSQSDuplicates: 1, emf.MetricSQSFailed: 1, "SQSFailedHandler": 1, emf.MetricReplays: 2},
			} {
				assert.Equal(t, "example-sqs", docs[i]["Service"])
				assert.Contains(t, docs[i], "_aws")
				for name, v := range want {
					assert.InDelta(t, v, docs[i][name], 0, "invocation %d: %s", i+1, name)
				}
			}
		})
	}
}
