package reliability_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/ddbfault"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/sqs"
)

// Secrets that requests carry; none may reach the logs or the table.
const (
	secretKey   = "raw-key-4111-1111"
	secretBody  = `{"card":"4111111111111111","cvc":"123"}`
	secretToken = "Bearer eyJ-secret-session-token"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestNoSecretsInLogsOrTable drives the guard, an HTTP wrapper and the SQS wrapper through
// their logged failure paths (store faults, a failed completion, fail-open, handler errors)
// with an INFO logger, then checks that neither the log output nor the table holds a raw
// key, a request body, a bearer token or a lease token.
func TestNoSecretsInLogsOrTable(t *testing.T) {
	t.Parallel()
	raw := ddblocal.Client(t)
	table := ddblocal.NewTable(t, raw)
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	client := ddbfault.New(raw)
	store := newStore(t, client, table)
	ctx := t.Context()

	guard := func(opts ...idem.Option) *idem.Guard {
		g, err := idem.New(store, "test", append([]idem.Option{idem.WithScope("secrets"), idem.WithLogger(logger)}, opts...)...)
		require.NoError(t, err)
		return g
	}
	g := guard()
	ok := func(context.Context) (string, error) { return secretBody, nil }

	client.Arm(ddbfault.Complete, ddbfault.ServerError, -1) // every attempt of the completion
	_, _, err := idem.Do(ctx, g, idem.Request{Key: secretKey + "-1", Fingerprint: []byte(secretBody)}, ok)
	require.ErrorIs(t, err, idem.ErrStore)
	client.Disarm()
	client.Arm(ddbfault.Claim, ddbfault.Throttle, 1)
	_, _, err = idem.Do(ctx, guard(idem.WithFailOpen(true)), idem.Request{Key: secretKey + "-2"}, ok)
	require.NoError(t, err, "fail-open runs the handler")
	_, _, err = idem.Do(ctx, g, idem.Request{Key: secretKey + "-3", Fingerprint: []byte(secretBody)}, ok)
	require.NoError(t, err)

	api, err := lambdawrap.HTTPAPI(g, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: secretBody}, nil
	}) // logs through g's logger
	require.NoError(t, err)
	req := httpRequest("/pay", secretKey+"-http", "tenant-a")
	client.Arm(ddbfault.Claim, ddbfault.ServerError, 1)
	resp, err := api(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode, "store unavailable")
	resp, err = api(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, 201, resp.StatusCode)

	h, err := sqs.New(g, func(_ context.Context, m events.SQSMessage) error {
		if strings.Contains(m.Body, "fail") {
			return errBoom
		}
		return nil
	}) // logs through the guard's logger
	require.NoError(t, err)
	msg := func(id, body string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, Body: body, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:q",
			MessageAttributes: map[string]events.SQSMessageAttribute{"Idempotency-Key": {DataType: "String", StringValue: aws.String(secretKey + "-sqs-" + id)}}}
	}
	client.Arm(ddbfault.Claim, ddbfault.Timeout, 1)
	_, err = h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg("m1", secretBody), msg("m2", secretBody+" fail"), msg("m3", secretBody)}})
	require.NoError(t, err)

	out := logs.String()
	require.NotEmpty(t, out, "the failure paths logged")
	items := scanTable(t, raw, table)
	require.NotEmpty(t, items)
	var tokens []string
	for _, item := range items {
		if tok, ok := item["lease_token"].(*types.AttributeValueMemberS); ok {
			tokens = append(tokens, tok.Value)
		}
		for name, av := range item {
			if s, ok := av.(*types.AttributeValueMemberS); ok {
				assert.NotContains(t, s.Value, secretKey, "raw key stored in attribute %s", name)
			}
		}
	}
	for _, secret := range append([]string{secretKey, "4111111111111111", secretToken, "eyJ-secret"}, tokens...) {
		assert.NotContains(t, out, secret)
	}
}

// TestCrossTenantReplayImpossible sends the same key and body from two tenants through an
// HTTP wrapper with default options: each gets its own run and its own response.
func TestCrossTenantReplayImpossible(t *testing.T) {
	t.Parallel()
	raw := ddblocal.Client(t)
	g, err := idem.New(newStore(t, raw, ddblocal.NewTable(t, raw)), "test", idem.WithScope("tenants"))
	require.NoError(t, err)
	var runs atomic.Int32
	api, err := lambdawrap.HTTPAPI(g, func(_ context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs.Add(1)
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"owner":"` + r.RequestContext.Authorizer.JWT.Claims["sub"] + `"}`}, nil
	})
	require.NoError(t, err)

	for _, tenant := range []string{"tenant-a", "tenant-b", "tenant-a", "tenant-b"} {
		resp, err := api(t.Context(), httpRequest("/pay", "shared-key", tenant))
		require.NoError(t, err)
		assert.Equal(t, 201, resp.StatusCode)
		assert.JSONEq(t, `{"owner":"`+tenant+`"}`, resp.Body, "a tenant only ever sees its own response")
	}
	assert.EqualValues(t, 2, runs.Load(), "one run per tenant")
}

func httpRequest(path, key, tenant string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		RawPath: path,
		Headers: map[string]string{"idempotency-key": key, "content-type": "application/json", "authorization": secretToken},
		Body:    secretBody,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: path},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": tenant}}},
		},
	}
}

func scanTable(t *testing.T, client *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	out, err := client.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Items
}
