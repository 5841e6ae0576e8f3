package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/lambdawrap"
)

// TestAPIStoreOutage runs the API against a DynamoDB endpoint that answers every call with
// 503 ServiceUnavailable: the guarded POST and the unguarded GET both answer 503 with
// Retry-After and a problem document, through the Lambda runtime and the local adapter,
// rather than failing the invocation (which API Gateway shows as a bare 500).
func TestAPIStoreOutage(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ServiceUnavailable","message":"down"}`))
	}))
	t.Cleanup(down.Close)
	// No SDK retries, so each request makes one call and the test does not wait on backoff.
	client := dynamodb.New(ddblocal.NewClient(down.URL).Options(), func(o *dynamodb.Options) {
		o.Retryer = aws.NopRetryer{}
	})
	metrics, err := emf.New(io.Discard, "test")
	require.NoError(t, err)
	h, err := newHandler(client, "idempotency", "orders", slog.New(slog.DiscardHandler), metrics)
	require.NoError(t, err)
	srv := httptest.NewServer(lambdawrap.LocalHandler(h))
	t.Cleanup(srv.Close)

	callers := map[string]caller{"invoke": invokeCaller(h), "local adapter": httpCaller(srv.URL)}
	requests := []struct {
		name, method, path, key, body string
	}{
		{name: "POST", method: http.MethodPost, path: "/orders", key: "outage-key", body: orderBody},
		{name: "GET", method: http.MethodGet, path: "/orders/0123456789abcdef0123456789abcdef"},
	}
	for name, call := range callers {
		for _, rq := range requests {
			t.Run(name+" "+rq.name, func(t *testing.T) {
				before := calls.Load()
				r := call(t, rq.method, rq.path, rq.key, rq.body)
				assert.Equal(t, http.StatusServiceUnavailable, r.status, r.body)
				assert.Equal(t, "1", r.headers["retry-after"])
				assert.Equal(t, "application/problem+json", r.headers["content-type"])
				var p struct{ Status int }
				require.NoError(t, json.Unmarshal([]byte(r.body), &p), r.body)
				assert.Equal(t, http.StatusServiceUnavailable, p.Status)
				assert.Positive(t, calls.Load()-before, "DynamoDB was asked")
			})
		}
	}
}
