package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
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
// environment) and sends the fixture's order through the Lambda runtime's handler path:
// new, retried (a replay, which DynamoDB Local refuses with an error response), reused for
// another body, and once more with the idempotency table gone. The log lines are JSON with
// the invocation's request ID, never show the key or the SDK's checksum warning, and each
// invocation writes one metrics document. The function's name scopes its stored keys. Each
// refused request has one INFO line with its stored key (the record's id, as idemctl takes
// it) and the reason.
func TestOperatorView(t *testing.T) {
	proctest.Setenv(t, ddblocal.Endpoint(t))
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "example-api")
	t.Setenv(lambdaenv.LogLevelVar, "")
	var logs, metricsOut bytes.Buffer
	logger := lambdaenv.Logger(&logs)
	client, err := lambdaenv.DynamoDB(context.Background(), logger)
	require.NoError(t, err)
	idemTable, ordersTable := apiTables(t, client)
	metrics, err := lambdaenv.Metrics(&metricsOut, "example-api")
	require.NoError(t, err)
	h, err := newHandler(client, idemTable, ordersTable, logger, metrics)
	require.NoError(t, err)
	broken, err := newHandler(client, "no-such-table", ordersTable, logger, metrics)
	require.NoError(t, err)

	order := loadEvent(t, "apigw-v2-post-order.json")
	key := order.Headers["idempotency-key"]
	other := loadEvent(t, "apigw-v2-post-order.json")
	other.Body = `{"sku":"GADGET-7","quantity":1,"amount_cents":990}`
	tests := []struct {
		request string
		handler httpHandler
		event   events.APIGatewayV2HTTPRequest
		status  int
		metric  string // counted once in the invocation's document
	}{
		{"req-new", h, order, http.StatusCreated, emf.MetricCompletions},
		{"req-retry", h, order, http.StatusCreated, emf.MetricReplays},
		{"req-other-body", h, other, http.StatusUnprocessableEntity, emf.MetricPayloadMismatches},
		{"req-store-down", broken, order, http.StatusServiceUnavailable, emf.MetricStoreErrors},
	}
	for _, tc := range tests {
		payload, err := json.Marshal(tc.event)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: tc.request})
		out, err := lambda.NewHandler(tc.handler).Invoke(ctx, payload)
		cancel()
		require.NoError(t, err)
		var resp events.APIGatewayV2HTTPResponse
		require.NoError(t, json.Unmarshal(out, &resp))
		assert.Equal(t, tc.status, resp.StatusCode, tc.request)
	}

	for _, secret := range []string{key, "checksum", "failed to close"} {
		assert.NotContains(t, logs.String(), secret)
	}
	lines := jsonlines.Parse(t, logs.Bytes())
	require.Len(t, lines, 3, "the two refusals and the store failure are logged:\n%s", logs.String())
	ids := assertStoredKeys(t, client, idemTable, "example-api.create-order#")
	require.Len(t, ids, 1)
	for i, want := range []struct {
		level, message, request, reason string
		status                          float64
	}{
		{"INFO", "lambdawrap: request refused", "req-other-body", "payload_mismatch", 422},
		{"ERROR", "lambdawrap: idempotency store failed", "req-store-down", "", 0},
		{"INFO", "lambdawrap: request refused", "req-store-down", "store", 503},
	} {
		assert.Equal(t, want.level, lines[i]["level"], "line %d", i)
		assert.Equal(t, want.message, lines[i]["message"], "line %d", i)
		assert.Equal(t, want.request, lines[i][lambdaenv.RequestIDKey], "line %d", i)
		if want.reason != "" {
			assert.Equal(t, want.reason, lines[i]["reason"], "line %d", i)
			assert.InDelta(t, want.status, lines[i]["status"], 0, "line %d", i)
			assert.Equal(t, ids[0], lines[i]["stored_key"], "line %d: the record's id", i)
		}
	}

	docs := jsonlines.Parse(t, metricsOut.Bytes())
	require.Len(t, docs, len(tests), "one metrics document per invocation")
	for i, tc := range tests {
		assert.InDelta(t, 1.0, docs[i][tc.metric], 0, "%s: %s", tc.request, tc.metric)
		assert.Equal(t, "example-api", docs[i]["Service"])
	}
}

// assertStoredKeys checks that table holds records, each under a key of the form
// prefix<sha256 hex>, and returns the keys.
func assertStoredKeys(t *testing.T, client *dynamodb.Client, table, prefix string) []string {
	t.Helper()
	var ids []string
	out, err := client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table)})
	require.NoError(t, err)
	require.NotEmpty(t, out.Items)
	for _, item := range out.Items {
		id, ok := item["id"].(*types.AttributeValueMemberS)
		require.True(t, ok, "a string id")
		assert.Regexp(t, "^"+regexp.QuoteMeta(prefix)+"[0-9a-f]{64}$", id.Value)
		ids = append(ids, id.Value)
	}
	return ids
}
