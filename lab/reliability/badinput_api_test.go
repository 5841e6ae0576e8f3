package reliability_test

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/proctest"
	"github.com/idemkit/idem/internal/samtables"
)

// TestBadInputExampleAPI runs the example-api binary on DynamoDB Local and sends it hostile
// requests over HTTP: each gets a 4xx, and no order is ever created.
func TestBadInputExampleAPI(t *testing.T) {
	t.Parallel()
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	names := samtables.NewTables(t, client, "IdempotencyTable", "OrdersTable")
	bin := proctest.Build(t, "github.com/idemkit/idem/cmd/example-api")
	port := proctest.FreePort(t)
	p := proctest.Start(t, bin, proctest.Env(endpoint,
		"IDEMPOTENCY_TABLE="+names["IdempotencyTable"], "ORDERS_TABLE="+names["OrdersTable"], "PORT="+port))
	base := "http://127.0.0.1:" + port
	httpClient := &http.Client{Timeout: 10 * time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := httpClient.Get(base + "/orders/none")
		if err == nil {
			resp.Body.Close()
			break
		}
		require.False(t, p.Exited() || time.Now().After(deadline), "example-api did not start:\n%s", p.Output())
	}

	const order = `{"sku":"book","quantity":1}`
	tests := []struct {
		name, key, body string
	}{
		{name: "no key", body: order},
		{name: "empty key", key: " ", body: order},
		{name: "64 KB key", key: strings.Repeat("k", 64<<10), body: order},
		{name: "empty body", key: "e-1"},
		{name: "truncated JSON", key: "e-2", body: `{"sku":"book","quantity":`},
		{name: "quantity a string", key: "e-3", body: `{"sku":"book","quantity":"1"}`},
		{name: "quantity zero", key: "e-4", body: `{"sku":"book","quantity":0}`},
		{name: "unknown field", key: "e-5", body: `{"sku":"book","quantity":1,"price":0}`},
		{name: "array body", key: "e-6", body: `[` + order + `]`},
		{name: "two objects", key: "e-7", body: order + order},
		{name: "NUL and invalid UTF-8", key: "e-8", body: "\x00\xff"},
		{name: "7 MB SKU", key: "e-9", body: `{"sku":"` + strings.Repeat("s", 7<<20) + `","quantity":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/orders", strings.NewReader(tc.body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			if tc.key != "" {
				req.Header.Set("Idempotency-Key", tc.key)
			}
			resp, err := httpClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.GreaterOrEqual(t, resp.StatusCode, 400, "refused")
			assert.Less(t, resp.StatusCode, 500, "a client error, not a crash")
		})
	}
	out, err := client.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(names["OrdersTable"]), Select: "COUNT"})
	require.NoError(t, err)
	assert.Zero(t, out.Count, "no order created")
	assert.False(t, p.Exited(), "still serving")
	require.NoError(t, p.Signal(os.Interrupt))
}
