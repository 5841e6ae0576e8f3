package idemhttp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/memstore"
)

// TestPassedThrough: a response that is flushed, or whose body grows over
// WithMaxResponseBody, reaches the client whole, as it is written; the key is recorded as
// completed without it, so the handler never runs again and a retry gets 500
// ProblemNotReplayable, as for a result larger than idem.WithMaxResultSize. A streamed
// response that is not cacheable releases the key.
func TestPassedThrough(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 4096)
	tests := []struct {
		name   string
		opts   []idemhttp.Option
		guard  []idem.Option
		status int
		answer func(w http.ResponseWriter) string // returns the whole body written
		runs   int64                              // after two requests
		retry  int                                // the second request's status
	}{
		{name: "flushed", status: http.StatusOK, runs: 1, retry: http.StatusInternalServerError,
			answer: func(w http.ResponseWriter) string {
				_, _ = io.WriteString(w, "event: 1\n\n")
				w.(http.Flusher).Flush()
				_, _ = io.WriteString(w, "event: 2\n\n")
				return "event: 1\n\nevent: 2\n\n"
			}},
		{name: "flushed through ResponseController", status: http.StatusAccepted, runs: 1, retry: http.StatusInternalServerError,
			answer: func(w http.ResponseWriter) string {
				w.WriteHeader(http.StatusAccepted)
				_, _ = io.WriteString(w, "started\n")
				if err := http.NewResponseController(w).Flush(); err != nil {
					panic(err)
				}
				_, _ = io.WriteString(w, "done\n")
				return "started\ndone\n"
			}},
		{name: "flushed before writing", status: http.StatusCreated, runs: 1, retry: http.StatusInternalServerError,
			answer: func(w http.ResponseWriter) string {
				w.WriteHeader(http.StatusCreated)
				w.(http.Flusher).Flush()
				_, _ = io.WriteString(w, "late")
				return "late"
			}},
		{name: "over WithMaxResponseBody", opts: []idemhttp.Option{idemhttp.WithMaxResponseBody(1024)},
			status: http.StatusOK, runs: 1, retry: http.StatusInternalServerError,
			answer: func(w http.ResponseWriter) string {
				for i := 0; i < len(big); i += 1000 {
					_, _ = io.WriteString(w, big[i:min(i+1000, len(big))])
				}
				return big
			}},
		{name: "held back, over the guard's WithMaxResultSize", guard: []idem.Option{idem.WithMaxResultSize(64), idem.WithCompression(1 << 20)},
			status: http.StatusOK, runs: 1, retry: http.StatusInternalServerError,
			answer: func(w http.ResponseWriter) string {
				_, _ = io.WriteString(w, big)
				return big
			}},
		{name: "flushed 503", status: http.StatusServiceUnavailable, runs: 2, retry: http.StatusServiceUnavailable,
			answer: func(w http.ResponseWriter) string {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, "partial")
				w.(http.Flusher).Flush()
				return "partial"
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs logRecords
			guardOpts := append([]idem.Option{idem.WithLogger(slog.New(&logs))}, tc.guard...)
			var want string
			h := &counter{answer: func(_ int64, w http.ResponseWriter, _ *http.Request) { want = tc.answer(w) }}
			srv := serve(t, memGuard(t, guardOpts...), h, tc.opts...)
			first := send(t, http.MethodPost, srv.URL, "k-1", "")
			assert.Equal(t, tc.status, first.status)
			assert.Equal(t, want, first.body)
			retry := send(t, http.MethodPost, srv.URL, "k-1", "")
			if tc.retry == http.StatusInternalServerError {
				checkProblem(t, retry, http.StatusInternalServerError, idemhttp.ProblemNotReplayable)
				assert.Contains(t, logs.messages(), "ERROR idemhttp: completed response cannot be replayed")
			} else {
				assert.Equal(t, tc.retry, retry.status)
			}
			assert.Equal(t, tc.runs, h.runs.Load())
		})
	}
}

// TestFlushReachesTheClient: a flushed part of the response reaches the client while the
// handler is still running: the middleware does not hold a stream back.
func TestFlushReachesTheClient(t *testing.T) {
	t.Parallel()
	read := make(chan struct{})
	h := &counter{answer: func(_ int64, w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-read // the client has read the first line
		_, _ = io.WriteString(w, "second\n")
	}}
	srv := serve(t, memGuard(t), h)
	req, err := http.NewRequest(http.MethodPost, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "k-1")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "first\n", line)
	close(read)
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, "second\n", string(rest))
}

// TestHijacked: a handler that hijacks the connection answers on it itself; nothing is
// stored and the key is released, so a retry runs the handler again.
func TestHijacked(t *testing.T) {
	t.Parallel()
	// The client has its answer before the handler returns and the key is released: it
	// waits for the release before it retries.
	released := make(chan struct{}, 2)
	g := memGuard(t, idem.WithHooks(idem.Hooks{OnReleased: func(context.Context, idem.Event) { released <- struct{}{} }}))
	h := &counter{answer: func(n int64, w http.ResponseWriter, _ *http.Request) {
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		defer func() { _ = conn.Close() }()
		body := fmt.Sprintf("run %d", n)
		_, _ = fmt.Fprintf(rw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		_ = rw.Flush()
		_, err = w.Write([]byte("after the hijack"))
		if !errors.Is(err, http.ErrHijacked) {
			panic(fmt.Sprintf("write after hijack: %v", err))
		}
	}}
	srv := serve(t, g, h)
	for i := range 2 {
		got := send(t, http.MethodPost, srv.URL, "k-1", "")
		assert.Equal(t, http.StatusOK, got.status)
		assert.Equal(t, fmt.Sprintf("run %d", i+1), got.body)
		<-released
	}
	assert.Equal(t, int64(2), h.runs.Load())
}

// TestTrailers: a response with trailers reaches the client as it does without the
// middleware (net/http sends trailers only with a chunked body), and is recorded without
// the response, since the stored form has no trailers.
func TestTrailers(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("b", 4096)
	tests := []struct {
		name    string
		answer  func(w http.ResponseWriter)
		trailer string // what the client gets
	}{
		{name: "declared", trailer: "abc", answer: func(w http.ResponseWriter) {
			w.Header().Set("Trailer", "X-Checksum")
			_, _ = io.WriteString(w, "body")
			w.Header().Set("X-Checksum", "abc")
		}},
		{name: "prefixed, chunked", trailer: "abc", answer: func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, big)
			w.Header().Set(http.TrailerPrefix+"X-Checksum", "abc")
		}},
		{name: "prefixed, short: net/http sends a length and no trailers", answer: func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, "body")
			w.Header().Set(http.TrailerPrefix+"X-Checksum", "abc")
		}},
	}
	get := func(t *testing.T, url string, key string) (http.Header, string) {
		req, err := http.NewRequest(http.MethodPost, url, nil)
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.Trailer, string(body)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &counter{answer: func(_ int64, w http.ResponseWriter, _ *http.Request) { tc.answer(w) }}
			plain := httptest.NewServer(h)
			t.Cleanup(plain.Close)
			wantTrailer, wantBody := get(t, plain.URL, "k-1")
			assert.Equal(t, tc.trailer, wantTrailer.Get("X-Checksum"))

			srv := serve(t, memGuard(t), h)
			trailer, body := get(t, srv.URL, "k-1")
			assert.Equal(t, wantBody, body)
			assert.Equal(t, wantTrailer, trailer)
			checkProblem(t, send(t, http.MethodPost, srv.URL, "k-1", ""), http.StatusInternalServerError, idemhttp.ProblemNotReplayable)
			assert.Equal(t, int64(2), h.runs.Load(), "once plain, once guarded")
		})
	}
}

// TestInformational: a 1xx answer (103 Early Hints) goes to the client at once with the
// headers set so far, and is not part of what is stored and replayed.
func TestInformational(t *testing.T) {
	t.Parallel()
	h := &counter{answer: func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "done")
	}}
	srv := serve(t, memGuard(t), h)
	post := func() (int, []int, string) {
		var early []int
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
			early = append(early, code)
			return nil
		}}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost, srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "k-1")
		got := do(t, req)
		return got.status, early, got.header.Get("Link")
	}
	status, early, link := post()
	assert.Equal(t, http.StatusCreated, status)
	assert.Equal(t, []int{http.StatusEarlyHints}, early)
	assert.Equal(t, "</style.css>; rel=preload", link)
	status, early, link = post()
	assert.Equal(t, http.StatusCreated, status)
	assert.Empty(t, early, "not replayed")
	assert.Equal(t, "</style.css>; rel=preload", link, "the final response's headers are")
	assert.Equal(t, int64(1), h.runs.Load())
}

// TestWriterContract: the writer the handler gets behaves as net/http's does: a second
// WriteHeader is ignored, a body is refused for 204 and 304, an invalid code panics.
func TestWriterContract(t *testing.T) {
	t.Parallel()
	mw, err := idemhttp.Middleware(memGuard(t))
	require.NoError(t, err)
	run := func(h http.HandlerFunc) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		req.Header.Set("Idempotency-Key", t.Name()+fmt.Sprint(&h))
		mw(h).ServeHTTP(rec, req)
		return rec
	}
	rec := run(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		w.WriteHeader(http.StatusTeapot)
	})
	assert.Equal(t, http.StatusAccepted, rec.Code)

	var writeErr error
	rec = run(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		_, writeErr = io.WriteString(w, "no")
	})
	assert.Equal(t, http.StatusNoContent, rec.Code)
	assert.ErrorIs(t, writeErr, http.ErrBodyNotAllowed)
	assert.Empty(t, rec.Body.String())

	assert.PanicsWithValue(t, "invalid WriteHeader code 42", func() {
		run(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(42) })
	})
}

// TestReplaysLambdaRecord: one semantics, one stored form: a response that lambdawrap
// stored (single-value headers and cookies, through an HTTP API) is replayed by the
// middleware to the same request under the same operation, and the reverse.
func TestReplaysLambdaRecord(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	lambdaRuns, httpRuns := 0, 0
	lambdaHandler, err := lambdawrap.HTTPAPI(newGuard(t, store),
		func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			lambdaRuns++
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated,
				Headers: map[string]string{"Content-Type": "application/json"},
				Cookies: []string{"a=1", "b=2"}, Body: `{"from":"lambda"}`}, nil
		})
	require.NoError(t, err)
	srv := serve(t, newGuard(t, store), &counter{answer: func(_ int64, w http.ResponseWriter, _ *http.Request) {
		httpRuns++
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"from":"http"}`)
	}})
	event := func(key string) events.APIGatewayV2HTTPRequest {
		return events.APIGatewayV2HTTPRequest{RawPath: "/orders", RawQueryString: "a=1",
			Headers: map[string]string{"idempotency-key": key}, Body: `{"sku":"A"}`,
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost}}}
	}

	_, err = lambdaHandler(t.Context(), event("k-lambda"))
	require.NoError(t, err)
	got := send(t, http.MethodPost, srv.URL+"/orders?a=1", "k-lambda", `{ "sku": "A" }`)
	assert.Equal(t, http.StatusCreated, got.status)
	assert.Equal(t, `{"from":"lambda"}`, got.body)
	assert.Equal(t, "application/json", got.header.Get("Content-Type"))
	assert.Equal(t, []string{"a=1", "b=2"}, got.header.Values("Set-Cookie"))
	assert.Equal(t, "true", got.header.Get("Idempotent-Replayed"))

	assert.Equal(t, http.StatusAccepted, send(t, http.MethodPost, srv.URL+"/orders?a=1", "k-http", `{"sku":"A"}`).status)
	resp, err := lambdaHandler(t.Context(), event("k-http"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, `{"from":"http"}`, resp.Body)
	assert.Equal(t, 1, lambdaRuns)
	assert.Equal(t, 1, httpRuns)
}

// TestReplaysStoredHeaders: a record written before header values were kept byte for byte
// (its values as JSON stored them, a Latin-1 byte as U+FFFD) replays as it was stored;
// one whose base64 header value does not decode is answered 500 ProblemNotReplayable, as
// a corrupt body is, and the handler does not run.
func TestReplaysStoredHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stored string // the response as the guard stored it
		check  func(t *testing.T, got response)
	}{
		{name: "written before", stored: `{"statusCode":200,"headers":null,"multiValueHeaders":{"Content-Disposition":["attachment; filename=\"caf\ufffd.txt\""]},"cookies":null,"body":"file"}`,
			check: func(t *testing.T, got response) {
				assert.Equal(t, http.StatusOK, got.status)
				assert.Equal(t, "attachment; filename=\"caf\ufffd.txt\"", got.header.Get("Content-Disposition"))
				assert.Equal(t, "file", got.body)
				assert.Equal(t, "true", got.header.Get("Idempotent-Replayed"))
			}},
		{name: "base64 header that does not decode", stored: `{"statusCode":200,"headers":null,"multiValueHeaders":{"X-A":["\ufffd"]},"multiValueHeadersBase64":{"X-A":["%%%"]},"cookies":null,"body":"file"}`,
			check: func(t *testing.T, got response) {
				checkProblem(t, got, http.StatusInternalServerError, idemhttp.ProblemNotReplayable)
				assert.Empty(t, got.header.Values("X-A"))
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := memstore.New()
			_, _, err := idem.Do(t.Context(), newGuard(t, store), idem.Request{Key: "k-1"},
				func(context.Context) (json.RawMessage, error) { return json.RawMessage(tc.stored), nil })
			require.NoError(t, err)
			h := created()
			srv := serve(t, newGuard(t, store), h)
			tc.check(t, send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`))
			assert.Equal(t, int64(0), h.runs.Load())
		})
	}
}
