package lambdawrap_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/lambdawrap"
)

func benchEvent(b *testing.B) events.APIGatewayV2HTTPRequest {
	b.Helper()
	var e events.APIGatewayV2HTTPRequest
	require.NoError(b, json.Unmarshal(loadEvent(b, "apigw-v2-jwt-authorizer").payload(b), &e))
	return e
}

// BenchmarkHTTPAPIReplay is the replay path of an HTTP API request on the in-memory store:
// header parsing, fingerprint, one store read, decoding the stored response.
func BenchmarkHTTPAPIReplay(b *testing.B) {
	a := &app{}
	h, err := lambdawrap.HTTPAPI(memGuard(b), a.httpAPI)
	require.NoError(b, err)
	e := benchEvent(b)
	ctx := context.Background()
	_, err = h(ctx, e)
	require.NoError(b, err)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		resp, err := h(ctx, e)
		if err != nil || resp.Headers[lambdawrap.ReplayedHeader] != "true" {
			b.Fatalf("not a replay: %v %v", resp, err)
		}
	}
}

// BenchmarkHTTPAPIReplayInvoke is the same replay as the Lambda runtime runs it, with the
// event decoded from and the response encoded to JSON.
func BenchmarkHTTPAPIReplayInvoke(b *testing.B) {
	a := &app{}
	h, err := lambdawrap.HTTPAPI(memGuard(b), a.httpAPI)
	require.NoError(b, err)
	lh := lambda.NewHandler(h)
	payload := loadEvent(b, "apigw-v2-jwt-authorizer").payload(b)
	ctx := context.Background()
	_, err = lh.Invoke(ctx, payload)
	require.NoError(b, err)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := lh.Invoke(ctx, payload); err != nil {
			b.Fatal(err)
		}
	}
	if a.runs.Load() != 1 {
		b.Fatalf("handler ran %d times", a.runs.Load())
	}
}

// BenchmarkHTTPAPIFirst is a new key: claim, handler, complete, on the in-memory store.
func BenchmarkHTTPAPIFirst(b *testing.B) {
	a := &app{}
	h, err := lambdawrap.HTTPAPI(memGuard(b), a.httpAPI)
	require.NoError(b, err)
	e := benchEvent(b)
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-%d", i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		e.Headers["idempotency-key"] = keys[i]
		if _, err := h(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPassThrough is a GET: the decorator's cost when it does not guard.
func BenchmarkPassThrough(b *testing.B) {
	a := &app{}
	h, err := lambdawrap.HTTPAPI(memGuard(b), a.httpAPI)
	require.NoError(b, err)
	e := benchEvent(b)
	e.RequestContext.HTTP.Method = "GET"
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := h(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}
