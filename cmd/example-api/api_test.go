package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/samtables"
	"github.com/idemkit/idem/lambdawrap"
)

var update = flag.Bool("update", false, "rewrite the *.golden.json files in testdata")

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// response is an HTTP response as the client sees it, with lower-case header names.
type response struct {
	status  int
	headers map[string]string
	body    string
}

// caller sends one request to the API under test; an empty key sends no Idempotency-Key.
type caller func(t *testing.T, method, path, key, body string) response

// apiTables creates the example's tables on DynamoDB Local from infra/template.yaml.
func apiTables(t *testing.T, client *dynamodb.Client) (idemTable, ordersTable string) {
	t.Helper()
	names := samtables.NewTables(t, client, "IdempotencyTable", "OrdersTable")
	return names["IdempotencyTable"], names["OrdersTable"]
}

// newTestHandler returns the example's handler on fresh tables, and the orders table.
func newTestHandler(t *testing.T) (httpHandler, *dynamodb.Client, string) {
	t.Helper()
	client := ddblocal.Client(t)
	idemTable, ordersTable := apiTables(t, client)
	metrics, err := emf.New(io.Discard, "test")
	require.NoError(t, err)
	h, err := newHandler(client, idemTable, ordersTable, slog.New(slog.DiscardHandler), metrics)
	require.NoError(t, err)
	return h, client, ordersTable
}

// loadEvent reads an HTTP API event fixture from testdata.
func loadEvent(t *testing.T, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var ev events.APIGatewayV2HTTPRequest
	require.NoError(t, json.Unmarshal(data, &ev))
	return ev
}

// invoke runs an event through the Lambda runtime's handler path (JSON in, JSON out),
// with a deadline as Lambda would give.
func invoke(t *testing.T, h httpHandler, ev events.APIGatewayV2HTTPRequest) response {
	t.Helper()
	payload, err := json.Marshal(ev)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := lambda.NewHandler(h).Invoke(ctx, payload)
	require.NoError(t, err)
	var resp events.APIGatewayV2HTTPResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	headers := map[string]string{}
	for k, v := range resp.Headers {
		headers[strings.ToLower(k)] = v
	}
	return response{status: resp.StatusCode, headers: headers, body: resp.Body}
}

// invokeCaller builds each request from the fixtures and invokes h with it.
func invokeCaller(h httpHandler) caller {
	return func(t *testing.T, method, path, key, body string) response {
		t.Helper()
		var ev events.APIGatewayV2HTTPRequest
		if method == http.MethodGet {
			ev = loadEvent(t, "apigw-v2-get-order.json")
			ev.PathParameters = map[string]string{"id": strings.TrimPrefix(path, "/orders/")}
		} else {
			ev = loadEvent(t, "apigw-v2-post-order.json")
			ev.Body = body
			ev.Headers["content-length"] = strconv.Itoa(len(body))
		}
		ev.RawPath, ev.RequestContext.HTTP.Path, ev.RequestContext.HTTP.Method = path, path, method
		delete(ev.Headers, "idempotency-key")
		if key != "" {
			ev.Headers["idempotency-key"] = key
		}
		return invoke(t, h, ev)
	}
}

// httpCaller sends real HTTP requests to base.
func httpCaller(base string) caller {
	client := &http.Client{Timeout: 30 * time.Second}
	return func(t *testing.T, method, path, key, body string) response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		headers := map[string]string{}
		for k := range resp.Header {
			headers[strings.ToLower(k)] = resp.Header.Get(k)
		}
		return response{status: resp.StatusCode, headers: headers, body: string(data)}
	}
}

// countOrders counts the rows of the orders table.
func countOrders(t *testing.T, client *dynamodb.Client, table string) int {
	t.Helper()
	out, err := client.Scan(context.Background(), &dynamodb.ScanInput{
		TableName:      aws.String(table),
		Select:         "COUNT",
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	return int(out.Count)
}

const (
	orderBody     = `{"sku":"WIDGET-42","quantity":2,"amount_cents":1250}`
	reorderedBody = "{ \"amount_cents\": 1250,\n  \"quantity\": 2, \"sku\": \"WIDGET-42\" }"
	otherBody     = `{"sku":"WIDGET-42","quantity":3,"amount_cents":1250}`
	invalidBody   = `{"sku":"WIDGET-42","quantity":0,"amount_cents":1250}`
)

// scenario is one behaviour of the API, run through every transport. It returns how many
// orders it expects to have been created.
type scenario struct {
	name string
	run  func(t *testing.T, call caller, key string) (orders int)
}

var scenarios = []scenario{
	{name: "duplicate POST replays the order", run: func(t *testing.T, call caller, key string) int {
		first := call(t, http.MethodPost, "/orders", key, orderBody)
		require.Equal(t, http.StatusCreated, first.status, first.body)
		assert.Empty(t, first.headers["idempotent-replayed"])
		second := call(t, http.MethodPost, "/orders", key, orderBody)
		assert.Equal(t, http.StatusCreated, second.status)
		assert.Equal(t, "true", second.headers["idempotent-replayed"])
		assert.Equal(t, first.body, second.body, "a replay is the same body byte for byte")
		assert.Equal(t, first.headers["location"], second.headers["location"])
		// JSON key order and white space do not make another request.
		third := call(t, http.MethodPost, "/orders", key, reorderedBody)
		assert.Equal(t, first.body, third.body)

		var order Order
		require.NoError(t, json.Unmarshal([]byte(first.body), &order))
		assert.Equal(t, "/orders/"+order.ID, first.headers["location"])
		got := call(t, http.MethodGet, "/orders/"+order.ID, "", "")
		assert.Equal(t, http.StatusOK, got.status)
		assert.JSONEq(t, first.body, got.body)
		return 1
	}},
	{name: "20 concurrent duplicates create one order", run: func(t *testing.T, call caller, key string) int {
		const n = 20
		responses := make([]response, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				responses[i] = call(t, http.MethodPost, "/orders", key, orderBody)
			}()
		}
		close(start)
		wg.Wait()
		var created []string
		for _, r := range responses {
			switch r.status {
			case http.StatusCreated:
				created = append(created, r.body)
			case http.StatusConflict:
				// In flight elsewhere: the client is told when to retry.
				assert.NotEmpty(t, r.headers["retry-after"])
				assert.Equal(t, "application/problem+json", r.headers["content-type"])
			default:
				t.Errorf("unexpected response %d %s", r.status, r.body)
			}
		}
		require.NotEmpty(t, created)
		for _, body := range created {
			assert.Equal(t, created[0], body)
		}
		after := call(t, http.MethodPost, "/orders", key, orderBody)
		assert.Equal(t, created[0], after.body)
		return 1
	}},
	{name: "key reused with another body is 422", run: func(t *testing.T, call caller, key string) int {
		first := call(t, http.MethodPost, "/orders", key, orderBody)
		require.Equal(t, http.StatusCreated, first.status, first.body)
		other := call(t, http.MethodPost, "/orders", key, otherBody)
		assert.Equal(t, http.StatusUnprocessableEntity, other.status)
		assert.Equal(t, "application/problem+json", other.headers["content-type"])
		return 1
	}},
	{name: "invalid body is 400 and replayed", run: func(t *testing.T, call caller, key string) int {
		first := call(t, http.MethodPost, "/orders", key, invalidBody)
		require.Equal(t, http.StatusBadRequest, first.status, first.body)
		assert.Equal(t, "application/problem+json", first.headers["content-type"])
		var p struct{ Status int }
		require.NoError(t, json.Unmarshal([]byte(first.body), &p))
		assert.Equal(t, http.StatusBadRequest, p.Status)
		second := call(t, http.MethodPost, "/orders", key, invalidBody)
		assert.Equal(t, http.StatusBadRequest, second.status)
		assert.Equal(t, "true", second.headers["idempotent-replayed"], "the 400 is stored")
		assert.Equal(t, first.body, second.body)
		return 0
	}},
	{name: "POST without a key is 400", run: func(t *testing.T, call caller, _ string) int {
		r := call(t, http.MethodPost, "/orders", "", orderBody)
		assert.Equal(t, http.StatusBadRequest, r.status)
		assert.Equal(t, "application/problem+json", r.headers["content-type"])
		return 0
	}},
	{name: "GET of an unknown order is 404", run: func(t *testing.T, call caller, _ string) int {
		r := call(t, http.MethodGet, "/orders/0123456789abcdef0123456789abcdef", "", "")
		assert.Equal(t, http.StatusNotFound, r.status)
		return 0
	}},
}

// runScenarios runs every scenario through call, one after another, each with its own key,
// checking how many orders each added to the table.
func runScenarios(t *testing.T, call caller, client *dynamodb.Client, ordersTable string) {
	t.Helper()
	for i, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			before := countOrders(t, client, ordersTable)
			want := sc.run(t, call, "key-"+strconv.Itoa(i))
			assert.Equal(t, want, countOrders(t, client, ordersTable)-before, "orders created")
		})
	}
}

func TestAPIInvoke(t *testing.T) {
	t.Parallel()
	h, client, ordersTable := newTestHandler(t)
	runScenarios(t, invokeCaller(h), client, ordersTable)
}

func TestAPILocalAdapter(t *testing.T) {
	t.Parallel()
	h, client, ordersTable := newTestHandler(t)
	srv := httptest.NewServer(lambdawrap.LocalHandler(h))
	t.Cleanup(srv.Close)
	runScenarios(t, httpCaller(srv.URL), client, ordersTable)
}

// TestAPIGolden runs the fixtures through the handler and compares the responses that do
// not depend on random ids or time with their golden files.
func TestAPIGolden(t *testing.T) {
	t.Parallel()
	h, _, _ := newTestHandler(t)
	tests := []struct {
		name    string
		fixture string
	}{
		{name: "invalid order", fixture: "apigw-v2-post-order-invalid.json"},
		{name: "unknown order", fixture: "apigw-v2-get-order.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := loadEvent(t, tc.fixture)
			payload, err := json.Marshal(ev)
			require.NoError(t, err)
			out, err := lambda.NewHandler(h).Invoke(context.Background(), payload)
			require.NoError(t, err)
			var indented bytes.Buffer
			require.NoError(t, json.Indent(&indented, out, "", "  "))
			indented.WriteByte('\n')
			golden := filepath.Join("testdata", strings.TrimSuffix(tc.fixture, ".json")+".golden.json")
			if *update {
				require.NoError(t, os.WriteFile(golden, indented.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), indented.String())
		})
	}
}
