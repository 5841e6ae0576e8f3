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
	"time"

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

// TestLocalHandlerClientHangsUp: API Gateway never cancels an invocation when its client
// goes away, and neither does the local adapter. A client that hangs up mid-run leaves the
// run going under its key: a retry meanwhile is told the key is in flight, and a retry
// after it ends replays its result. The handler runs once.
func TestLocalHandlerClientHangsUp(t *testing.T) {
	t.Parallel()
	a := &app{started: make(chan struct{}, 2), release: make(chan struct{}), hold: 1}
	h, err := lambdawrap.HTTPAPI(memGuard(t), a.httpAPI)
	require.NoError(t, err)
	local := lambdawrap.LocalHandler(h)
	gone := make(chan struct{})   // the server saw the first client hang up
	served := make(chan struct{}) // the first request's ServeHTTP returned
	var first sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		isFirst := false
		first.Do(func() { isFirst = true })
		if !isFirst {
			local.ServeHTTP(w, r)
			return
		}
		defer close(served)
		ctx := r.Context()
		go func() {
			select {
			case <-ctx.Done():
				close(gone)
			case <-served:
			}
		}()
		local.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	body := []byte(`{"sku":"MUG-7"}`)

	ctx, hangUp := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/orders", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "k-gone")
	req.Header.Set("Content-Type", "application/json")
	clientErr := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		clientErr <- err
	}()
	<-a.started
	hangUp()
	require.ErrorIs(t, <-clientErr, context.Canceled)
	<-gone

	inFlight, inFlightBody := do(t, http.MethodPost, srv.URL+"/orders", "k-gone", "application/json", body)
	assert.Equal(t, http.StatusConflict, inFlight.StatusCode, "the run goes on: %s", inFlightBody)
	assert.Contains(t, string(inFlightBody), lambdawrap.ProblemInProgress)

	close(a.release)
	<-served
	replay, replayBody := do(t, http.MethodPost, srv.URL+"/orders", "k-gone", "application/json", body)
	assert.Equal(t, http.StatusCreated, replay.StatusCode)
	assert.Equal(t, "true", replay.Header.Get(lambdawrap.ReplayedHeader))
	assert.JSONEq(t, `{"order":"ord-0001","path":"/orders"}`, string(replayBody))
	assert.Equal(t, int64(1), a.runs.Load(), "the handler ran once")
}

// TestLocalHandlerKeepsTheRequestDeadline: the invocation no longer ends with the client,
// but a deadline on the request's context (a server's timeout) still bounds it, and the
// request's values reach the handler.
func TestLocalHandlerKeepsTheRequestDeadline(t *testing.T) {
	t.Parallel()
	type key struct{}
	deadline := time.Now().Add(time.Second)
	var (
		got   time.Time
		ok    bool
		value any
	)
	h := func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		got, ok = ctx.Deadline()
		value = ctx.Value(key{})
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNoContent}, nil
	}
	ctx, cancel := context.WithDeadline(context.WithValue(context.Background(), key{}, "v"), deadline)
	defer cancel()
	rec := httptest.NewRecorder()
	lambdawrap.LocalHandler(h).ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodPost, "/", nil))
	require.Equal(t, http.StatusNoContent, rec.Code)
	require.True(t, ok, "the handler's context has a deadline")
	assert.False(t, got.After(deadline), "no later than the request's: %v > %v", got, deadline)
	assert.Equal(t, "v", value)
}
