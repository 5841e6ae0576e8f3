package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

func TestParseOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		base64  bool
		wantErr string
	}{
		{name: "valid", body: `{"sku":"A-1","quantity":3,"amount_cents":999}`},
		{name: "valid base64", body: base64.StdEncoding.EncodeToString([]byte(`{"sku":"A","quantity":1,"amount_cents":1}`)), base64: true},
		{name: "bad base64", body: "%%%", base64: true, wantErr: "body: not valid base64"},
		{name: "empty", body: "", wantErr: "body: not valid JSON"},
		{name: "not an object", body: `[1]`, wantErr: "body: must be a JSON object"},
		{name: "unknown field", body: `{"sku":"A","quantity":1,"amount_cents":1,"x":1}`, wantErr: `body: unknown field "x"`},
		{name: "truncated", body: `{"sku":"A"`, wantErr: "body: not valid JSON"},
		{name: "trailing data", body: `{"sku":"A","quantity":1,"amount_cents":1} {}`, wantErr: "body: unexpected data after the JSON object"},
		{name: "missing sku", body: `{"quantity":1,"amount_cents":1}`, wantErr: "sku: required"},
		{name: "empty sku", body: `{"sku":"","quantity":1,"amount_cents":1}`, wantErr: "sku: required"},
		{name: "long sku", body: `{"sku":"` + string(make65()) + `","quantity":1,"amount_cents":1}`, wantErr: "sku: at most 64 bytes"},
		{name: "sku not a string", body: `{"sku":5,"quantity":1,"amount_cents":1}`, wantErr: "sku: must be a JSON string"},
		{name: "missing quantity", body: `{"sku":"A","amount_cents":1}`, wantErr: "quantity: required"},
		{name: "zero quantity", body: `{"sku":"A","quantity":0,"amount_cents":1}`, wantErr: "quantity: must be between 1 and 10000"},
		{name: "fractional quantity", body: `{"sku":"A","quantity":1.5,"amount_cents":1}`, wantErr: "quantity: must be a JSON integer"},
		{name: "missing amount", body: `{"sku":"A","quantity":1}`, wantErr: "amount_cents: required"},
		{name: "negative amount", body: `{"sku":"A","quantity":1,"amount_cents":-5}`, wantErr: "amount_cents: must be between 1 and 100000000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseOrder(events.APIGatewayV2HTTPRequest{Body: tc.body, IsBase64Encoded: tc.base64})
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			// The message is the problem's detail, which the client reads: its text is the
			// behaviour under test here.
			assert.EqualError(t, err, tc.wantErr)
		})
	}
}

func make65() []byte {
	b := make([]byte, 65)
	for i := range b {
		b[i] = 'x'
	}
	return b
}

// getItemFunc is a hand-written fake of ordersAPI.
type getItemFunc func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)

func (f getItemFunc) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return f(in)
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	stored := Order{ID: "abc", SKU: "A", Quantity: 1, AmountCents: 5, CreatedAt: time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)}
	item, err := attributevalue.MarshalMap(stored)
	require.NoError(t, err)
	db := getItemFunc(func(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
		var key struct{ ID string }
		if err := attributevalue.UnmarshalMap(in.Key, &key); err != nil {
			return nil, err
		}
		switch key.ID {
		case "abc":
			return &dynamodb.GetItemOutput{Item: item}, nil
		case "broken":
			return nil, errors.New("network down")
		}
		return &dynamodb.GetItemOutput{}, nil
	})
	o := &orders{db: db, table: "orders", now: time.Now, logger: slog.New(slog.DiscardHandler)}
	tests := []struct {
		name    string
		method  string
		path    string
		status  int
		allow   string
		wantErr bool
	}{
		{name: "get", method: http.MethodGet, path: "/orders/abc", status: http.StatusOK},
		{name: "get missing", method: http.MethodGet, path: "/orders/nope", status: http.StatusNotFound},
		{name: "get empty id", method: http.MethodGet, path: "/orders/", status: http.StatusNotFound},
		{name: "get nested path", method: http.MethodGet, path: "/orders/abc/x", status: http.StatusNotFound},
		{name: "get store error", method: http.MethodGet, path: "/orders/broken", status: http.StatusServiceUnavailable},
		{name: "delete order", method: http.MethodDelete, path: "/orders/abc", status: http.StatusMethodNotAllowed, allow: "GET"},
		{name: "get collection", method: http.MethodGet, path: "/orders", status: http.StatusMethodNotAllowed, allow: "POST"},
		{name: "unknown path", method: http.MethodGet, path: "/", status: http.StatusNotFound},
		{name: "post outside a guard", method: http.MethodPost, path: "/orders", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := events.APIGatewayV2HTTPRequest{RawPath: tc.path, Body: `{"sku":"A","quantity":1,"amount_cents":1}`}
			req.RequestContext.HTTP.Method = tc.method
			resp, err := o.handle(context.Background(), req)
			if tc.wantErr {
				if tc.method == http.MethodPost {
					// Attach needs the lease of a guarded call: unguarded, nothing is written.
					assert.ErrorIs(t, err, idem.ErrNoLease)
				} else {
					assert.Error(t, err)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, tc.allow, resp.Headers["Allow"])
			if tc.status == http.StatusOK {
				var got Order
				require.NoError(t, json.Unmarshal([]byte(resp.Body), &got))
				assert.Equal(t, stored, got)
			} else {
				assert.Equal(t, "application/problem+json", resp.Headers["Content-Type"])
			}
		})
	}
}

// FuzzParseOrder feeds arbitrary bodies to the order parser: it never panics, and what it
// accepts is within the limits.
func FuzzParseOrder(f *testing.F) {
	for _, name := range []string{"apigw-v2-post-order.json", "apigw-v2-post-order-invalid.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(f, err)
		var ev events.APIGatewayV2HTTPRequest
		require.NoError(f, json.Unmarshal(data, &ev))
		f.Add(ev.Body, false)
	}
	f.Add(`{"sku":"A","quantity":1,"amount_cents":1} `, false)
	f.Add(base64.StdEncoding.EncodeToString([]byte(`{"sku":"A","quantity":1,"amount_cents":1}`)), true)
	f.Fuzz(func(t *testing.T, body string, isBase64 bool) {
		in, err := parseOrder(events.APIGatewayV2HTTPRequest{Body: body, IsBase64Encoded: isBase64})
		if err != nil {
			return
		}
		assert.NotEmpty(t, *in.SKU)
		assert.LessOrEqual(t, len(*in.SKU), maxSKULength)
		assert.True(t, *in.Quantity >= 1 && *in.Quantity <= maxQuantity)
		assert.True(t, *in.AmountCents >= 1 && *in.AmountCents <= maxAmount)
	})
}
