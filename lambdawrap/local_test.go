package lambdawrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/lambdawrap"
)

// serve starts the app, decorated with HTTPAPI, behind the local adapter.
func serve(t *testing.T, a *app) *httptest.Server {
	t.Helper()
	h, err := lambdawrap.HTTPAPI(memGuard(t), a.httpAPI)
	require.NoError(t, err)
	srv := httptest.NewServer(lambdawrap.LocalHandler(h))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url, key, contentType string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, bytes.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

func TestLocalHandlerReplay(t *testing.T) {
	t.Parallel()
	a := &app{}
	srv := serve(t, a)
	body := []byte(`{"sku":"MUG-7","quantity":1}`)

	first, firstBody := do(t, http.MethodPost, srv.URL+"/orders?src=web", "k-1", "application/json", body)
	assert.Equal(t, http.StatusCreated, first.StatusCode)
	assert.Equal(t, "application/json", first.Header.Get("Content-Type"))
	assert.Equal(t, []string{"session=s1; HttpOnly; Secure"}, first.Header.Values("Set-Cookie"))
	assert.Empty(t, first.Header.Get(lambdawrap.ReplayedHeader))

	replay, replayBody := do(t, http.MethodPost, srv.URL+"/orders?src=web", "k-1", "application/json", body)
	assert.Equal(t, http.StatusCreated, replay.StatusCode)
	assert.Equal(t, "true", replay.Header.Get(lambdawrap.ReplayedHeader))
	assert.Equal(t, firstBody, replayBody)
	for _, h := range []string{"Content-Type", "Location", "X-Run", "Set-Cookie"} {
		assert.Equal(t, first.Header.Values(h), replay.Header.Values(h), h)
	}
	assert.Equal(t, int64(1), a.runs.Load())

	other, otherBody := do(t, http.MethodPost, srv.URL+"/orders?src=web", "k-1", "application/json", []byte(`{"sku":"MUG-8"}`))
	assert.Equal(t, http.StatusUnprocessableEntity, other.StatusCode)
	assert.Equal(t, "application/problem+json", other.Header.Get("Content-Type"))
	assert.Contains(t, string(otherBody), lambdawrap.ProblemKeyReused)

	missing, missingBody := do(t, http.MethodPost, srv.URL+"/orders", "", "application/json", body)
	assert.Equal(t, http.StatusBadRequest, missing.StatusCode)
	var p map[string]any
	require.NoError(t, json.Unmarshal(missingBody, &p))
	assert.Equal(t, lambdawrap.ProblemMissingKey, p["type"])

	for range 2 {
		get, _ := do(t, http.MethodGet, srv.URL+"/orders", "k-1", "", nil)
		assert.Equal(t, http.StatusCreated, get.StatusCode)
		assert.Empty(t, get.Header.Get(lambdawrap.ReplayedHeader))
	}
	assert.Equal(t, int64(3), a.runs.Load())
}

func TestLocalHandlerBinary(t *testing.T) {
	t.Parallel()
	a := &app{}
	srv := serve(t, a)
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
	first, firstBody := do(t, http.MethodPost, srv.URL+"/avatars", "img-1", "image/png", png)
	assert.Equal(t, http.StatusCreated, first.StatusCode)
	assert.Equal(t, png, firstBody, "binary echoed through base64 both ways")
	replay, replayBody := do(t, http.MethodPost, srv.URL+"/avatars", "img-1", "image/png", png)
	assert.Equal(t, "true", replay.Header.Get(lambdawrap.ReplayedHeader))
	assert.Equal(t, png, replayBody)
	assert.Equal(t, int64(1), a.runs.Load())
}

// TestLocalHandlerConcurrent: duplicates from real clients while the first runs get 409.
func TestLocalHandlerConcurrent(t *testing.T) {
	t.Parallel()
	a := &app{started: make(chan struct{}, 1), release: make(chan struct{})}
	srv := serve(t, a)
	body := []byte(`{"n":1}`)
	firstDone := make(chan int, 1)
	go func() {
		resp, _ := do(t, http.MethodPost, srv.URL+"/orders", "dup-1", "application/json", body)
		firstDone <- resp.StatusCode
	}()
	<-a.started
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, b := do(t, http.MethodPost, srv.URL+"/orders", "dup-1", "application/json", body)
			assert.Equal(t, http.StatusConflict, resp.StatusCode)
			assert.NotEmpty(t, resp.Header.Get("Retry-After"))
			assert.Contains(t, string(b), lambdawrap.ProblemInProgress)
		}()
	}
	wg.Wait()
	close(a.release)
	assert.Equal(t, http.StatusCreated, <-firstDone)
	assert.Equal(t, int64(1), a.runs.Load())
}

func TestLocalHandlerErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		h      func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
		body   []byte
		status int
		want   string
	}{
		{name: "handler error", h: func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{}, errors.New("boom")
		}, status: 500, want: `{"message":"Internal Server Error"}`},
		{name: "bad base64 response", h: func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: "*", IsBase64Encoded: true}, nil
		}, status: 500, want: `{"message":"Internal Server Error"}`},
		{name: "no status", h: func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{Body: "ok"}, nil
		}, status: 200, want: "ok"},
		{name: "body too large", h: func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
		}, body: make([]byte, lambdawrap.LocalMaxBody+1), status: 413, want: `{"message":"Request Entity Too Large"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(lambdawrap.LocalHandler(tc.h))
			t.Cleanup(srv.Close)
			resp, body := do(t, http.MethodPost, srv.URL+"/", "", "application/octet-stream", tc.body)
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, tc.want, string(body))
		})
	}
}

// TestLocalHandlerShapes: REST API and load balancer functions run locally as HTTP API
// functions do: a retried POST is replayed with its status, headers, cookies and body,
// another query string under the same key is 422, a binary body goes through base64 both
// ways, and a GET passes through.
func TestLocalHandlerShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		serve   func(t *testing.T, a *app) http.Handler
		cookies []string // the app's Set-Cookie headers for this shape
	}{
		{name: "HTTP API", cookies: []string{"session=s1; HttpOnly; Secure"}, serve: func(t *testing.T, a *app) http.Handler {
			h, err := lambdawrap.HTTPAPI(memGuard(t), a.httpAPI)
			require.NoError(t, err)
			return lambdawrap.LocalHandler(h)
		}},
		{name: "REST", cookies: []string{"a=1; Path=/", "b=2; Path=/"}, serve: func(t *testing.T, a *app) http.Handler {
			h, err := lambdawrap.REST(memGuard(t), a.rest)
			require.NoError(t, err)
			return lambdawrap.LocalHandler(h)
		}},
		{name: "ALB", serve: func(t *testing.T, a *app) http.Handler {
			h, err := lambdawrap.ALB(memGuard(t), a.alb)
			require.NoError(t, err)
			return lambdawrap.LocalHandler(h)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := &app{}
			srv := httptest.NewServer(tc.serve(t, a))
			t.Cleanup(srv.Close)
			body := []byte(`{"sku":"MUG-7","quantity":1}`)

			first, firstBody := do(t, http.MethodPost, srv.URL+"/orders?src=web", "k-1", "application/json", body)
			assert.Equal(t, http.StatusCreated, first.StatusCode)
			assert.Equal(t, "application/json", first.Header.Get("Content-Type"))
			assert.Equal(t, "/orders/ord-0001", first.Header.Get("Location"))
			assert.Equal(t, tc.cookies, first.Header.Values("Set-Cookie"))
			assert.Contains(t, string(firstBody), `"path":"/orders"`)
			assert.Empty(t, first.Header.Get(lambdawrap.ReplayedHeader))

			replay, replayBody := do(t, http.MethodPost, srv.URL+"/orders?src=web", "k-1", "application/json", body)
			assert.Equal(t, http.StatusCreated, replay.StatusCode)
			assert.Equal(t, "true", replay.Header.Get(lambdawrap.ReplayedHeader))
			assert.Equal(t, firstBody, replayBody)
			for _, h := range []string{"Content-Type", "Location", "X-Run", "Set-Cookie"} {
				assert.Equal(t, first.Header.Values(h), replay.Header.Values(h), h)
			}

			other, otherBody := do(t, http.MethodPost, srv.URL+"/orders?src=app", "k-1", "application/json", body)
			assert.Equal(t, http.StatusUnprocessableEntity, other.StatusCode, "another query string is another request")
			assert.Equal(t, "application/problem+json", other.Header.Get("Content-Type"))
			assert.Contains(t, string(otherBody), lambdawrap.ProblemKeyReused)

			png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
			bin, binBody := do(t, http.MethodPost, srv.URL+"/avatars", "img-1", "image/png", png)
			assert.Equal(t, http.StatusCreated, bin.StatusCode)
			assert.Equal(t, png, binBody, "binary echoed through base64 both ways")

			get, _ := do(t, http.MethodGet, srv.URL+"/orders", "k-1", "", nil)
			assert.Equal(t, http.StatusCreated, get.StatusCode)
			assert.Empty(t, get.Header.Get(lambdawrap.ReplayedHeader))
			assert.Equal(t, int64(3), a.runs.Load())
		})
	}
}
