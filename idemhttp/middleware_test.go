package idemhttp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// TestConcurrentDuplicates: duplicates sent while the first is running get 409 with
// Retry-After and the handler runs once; once it is done, a retry gets its response.
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	held := newHold()
	h := &counter{answer: func(run int64, w http.ResponseWriter, _ *http.Request) {
		held.wait()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "run %d", run)
	}}
	srv := serve(t, memGuard(t), h)
	got, dups := held.duplicates(t, srv.URL+"/orders", "k-1", `{"sku":"A"}`, 8)
	assert.Equal(t, int64(1), h.runs.Load(), "one run")
	assert.Equal(t, http.StatusCreated, got.status)
	assert.Equal(t, "run 1", got.body)
	checkInProgress(t, dups)
	again := send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{"sku":"A"}`)
	assert.Equal(t, http.StatusCreated, again.status)
	assert.Equal(t, "run 1", again.body)
	assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	assert.Equal(t, int64(1), h.runs.Load())
}

// TestReplayByteForByte: a replay is the first response as it came off the wire (status
// line, every header with every value in order, Set-Cookie included, framing and body),
// plus Idempotent-Replayed; only the server's Date differs.
func TestReplayByteForByte(t *testing.T) {
	t.Parallel()
	binary := []byte{0x89, 'P', 'N', 'G', 0, 0xff, 0xfe, '\r', '\n'}
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter)
	}{
		{name: "JSON with multi-value headers and cookies", answer: func(w http.ResponseWriter) {
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Location", "/orders/1")
			h.Add("X-Multi", "a")
			h.Add("X-Multi", "b, c")
			h.Add("Set-Cookie", "session=s1; HttpOnly; Secure")
			h.Add("Set-Cookie", "theme=dark; Path=/")
			h["x-not-canonical"] = []string{"as set"}
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"order":"1", "note":"<&>"}`)
		}},
		{name: "binary body", answer: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(binary)
		}},
		{name: "sniffed content type, several writes", answer: func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, "<html><body>")
			_, _ = io.WriteString(w, "ok</body></html>")
		}},
		{name: "chunked: larger than net/http buffers", answer: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			for range 64 {
				_, _ = io.WriteString(w, strings.Repeat("0123456789abcdef", 8)+"\n")
			}
		}},
		{name: "content length set by the handler", answer: func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "2")
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, "ok")
		}},
		{name: "no content", answer: func(w http.ResponseWriter) {
			w.Header().Set("X-Id", "7")
			w.WriteHeader(http.StatusNoContent)
		}},
		{name: "nothing written", answer: func(http.ResponseWriter) {}},
		{name: "header changed after WriteHeader", answer: func(w http.ResponseWriter) {
			w.Header().Set("X-Before", "1")
			w.WriteHeader(http.StatusOK)
			w.Header().Set("X-After", "not sent")
			_, _ = io.WriteString(w, "body")
		}},
		{name: "client error", answer: func(w http.ResponseWriter) {
			http.Error(w, "no such sku", http.StatusBadRequest)
		}},
		{name: "header values with obs-text", answer: func(w http.ResponseWriter) {
			// A Latin-1 file name: bytes 0x80-0xFF that are not UTF-8, as RFC 9110's
			// obs-text allows in a field value.
			w.Header().Set("Content-Disposition", "attachment; filename=\"caf\xe9 \xa9.txt\"")
			w.Header().Add("X-Mixed", "plain")
			w.Header().Add("X-Mixed", "\xff\x80 and \xc3\xa9")
			w.Header().Set("X-Utf8", "café")
			_, _ = io.WriteString(w, "file")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &counter{answer: func(_ int64, w http.ResponseWriter, _ *http.Request) { tc.answer(w) }}
			srv := serve(t, memGuard(t), h)
			first := send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`)
			replay := send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`)
			assert.Equal(t, int64(1), h.runs.Load())
			assert.Empty(t, first.header.Values("Idempotent-Replayed"))
			assert.Equal(t, []string{"true"}, replay.header.Values("Idempotent-Replayed"))
			assert.Equal(t, first.dump, strings.Replace(replay.dump, "Idempotent-Replayed: true\r\n", "", 1))
			assert.NotContains(t, replay.dump, "not sent")

			// And as the handler wrote it, without the server between.
			want := httptest.NewRecorder()
			tc.answer(want)
			assert.Equal(t, want.Code, replay.status)
			assert.Equal(t, want.Body.String(), replay.body)
			for k, vs := range want.Result().Header {
				assert.Equal(t, vs, replay.header.Values(k), k)
			}
		})
	}
}

// TestKeyReused: the key of a completed request, reused with another method, path, query
// string or body, is refused with 422 and the handler does not run; the same request
// written otherwise (JSON keys reordered, white space, query parameters reordered) is
// replayed.
func TestKeyReused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, target, body string
		replay                     bool
	}{
		{name: "other method", method: http.MethodPatch, target: "/orders?a=1&b=2", body: `{"sku":"A","qty":1}`},
		{name: "other path", method: http.MethodPost, target: "/orders/2?a=1&b=2", body: `{"sku":"A","qty":1}`},
		{name: "other query", method: http.MethodPost, target: "/orders?a=1&b=3", body: `{"sku":"A","qty":1}`},
		{name: "other body", method: http.MethodPost, target: "/orders?a=1&b=2", body: `{"sku":"A","qty":2}`},
		{name: "same request written otherwise", method: http.MethodPost, target: "/orders?b=2&a=1", body: "{\"qty\": 1,\n \"sku\": \"A\"}", replay: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := created()
			srv := serve(t, memGuard(t), h)
			first := send(t, http.MethodPost, srv.URL+"/orders?a=1&b=2", "k-1", `{"sku":"A","qty":1}`)
			require.Equal(t, http.StatusCreated, first.status)
			got := send(t, tc.method, srv.URL+tc.target, "k-1", tc.body)
			if tc.replay {
				assert.Equal(t, first.body, got.body)
				assert.Equal(t, "true", got.header.Get("Idempotent-Replayed"))
			} else {
				checkProblem(t, got, http.StatusUnprocessableEntity, idemhttp.ProblemKeyReused)
			}
			assert.Equal(t, int64(1), h.runs.Load())
		})
	}
}

// TestNotStored: a 5xx, 409 or 429 goes to the client, is not stored, and releases the
// key, so a retry runs the handler again; WithCacheable says otherwise.
func TestNotStored(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		opts   []idemhttp.Option
		runs   int64
	}{
		{name: "500", status: http.StatusInternalServerError, runs: 2},
		{name: "503", status: http.StatusServiceUnavailable, runs: 2},
		{name: "409", status: http.StatusConflict, runs: 2},
		{name: "429", status: http.StatusTooManyRequests, runs: 2},
		{name: "400 is stored", status: http.StatusBadRequest, runs: 1},
		{name: "WithCacheable refuses 400", status: http.StatusBadRequest, runs: 2,
			opts: []idemhttp.Option{idemhttp.WithCacheable(func(s int) bool { return s < 400 })}},
		{name: "WithCacheable stores 503", status: http.StatusServiceUnavailable, runs: 1,
			opts: []idemhttp.Option{idemhttp.WithCacheable(func(int) bool { return true })}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var hooks hookEvents
			h := &counter{answer: func(n int64, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				fmt.Fprintf(w, "run %d", n)
			}}
			srv := serve(t, memGuard(t, idem.WithHooks(hooks.hooks())), h, tc.opts...)
			for i := range 2 {
				got := send(t, http.MethodPost, srv.URL, "k-1", "")
				assert.Equal(t, tc.status, got.status)
				want := i + 1
				if tc.runs == 1 {
					want = 1
				}
				assert.Equal(t, fmt.Sprintf("run %d", want), got.body)
			}
			assert.Equal(t, tc.runs, h.runs.Load())
			assert.Equal(t, int(tc.runs), hooks.count("claimed"))
			if tc.runs == 2 {
				assert.Equal(t, 2, hooks.count("released"))
			}
		})
	}
}

// TestStoreFailures: a store that fails before the handler runs is answered 503 with
// Retry-After and the handler does not run; after it ran, the answer is what the failure
// means (lambdawrap's table). The store is the in-memory one behind a failing wrapper.
func TestStoreFailures(t *testing.T) {
	t.Parallel()
	errDown := errors.New("connection refused")
	tests := []struct {
		name   string
		fail   func(f *storetest.Faulty)
		status int
		typ    string // problem type; "" for the handler's own response
		runs   int64
	}{
		{name: "claim fails", fail: func(f *storetest.Faulty) { f.Fail("claim", errDown, false) },
			status: http.StatusServiceUnavailable, typ: idemhttp.ProblemStoreUnavailable, runs: 0},
		{name: "completion commits nothing", fail: func(f *storetest.Faulty) {
			f.Fail("complete", fmt.Errorf("cancelled: %w", idemstore.ErrNotCommitted), false)
		}, status: http.StatusServiceUnavailable, typ: idemhttp.ProblemNotCommitted, runs: 1},
		{name: "completion not recorded", fail: func(f *storetest.Faulty) { f.Fail("complete", errDown, false) },
			status: http.StatusCreated, runs: 1},
		{name: "completion finds the lease lost", fail: func(f *storetest.Faulty) { f.Fail("complete", idemstore.ErrLeaseLost, false) },
			status: http.StatusConflict, typ: idemhttp.ProblemLeaseLost, runs: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs logRecords
			store := storetest.NewFaulty(memstore.New())
			tc.fail(store)
			h := created()
			srv := serve(t, newGuard(t, store, idem.WithLogger(slog.New(&logs))), h)
			got := send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`)
			assert.Equal(t, tc.runs, h.runs.Load())
			if tc.typ == "" {
				assert.Equal(t, tc.status, got.status)
				assert.Contains(t, got.body, `"run":1`)
			} else {
				checkProblem(t, got, tc.status, tc.typ)
			}
			if tc.status == http.StatusServiceUnavailable || tc.typ == idemhttp.ProblemLeaseLost {
				assert.Equal(t, "1", got.header.Get("Retry-After"))
			}
			assert.NotEmpty(t, logs.messages(), "the failure is logged")
		})
	}
}

// TestStoreDownThenUp: while the store is down every request is answered 503 and nothing
// runs; once it is back, the retry runs the handler once.
func TestStoreDownThenUp(t *testing.T) {
	t.Parallel()
	store := storetest.NewFaulty(memstore.New())
	store.Fail("claim", errors.New("connection refused"), false)
	h := created()
	srv := serve(t, newGuard(t, store), h)
	for range 2 {
		checkProblem(t, send(t, http.MethodPost, srv.URL, "k-1", ""), http.StatusServiceUnavailable, idemhttp.ProblemStoreUnavailable)
	}
	store.Fail("claim", nil, false)
	assert.Equal(t, http.StatusCreated, send(t, http.MethodPost, srv.URL, "k-1", "").status)
	assert.Equal(t, http.StatusCreated, send(t, http.MethodPost, srv.URL, "k-1", "").status)
	assert.Equal(t, int64(1), h.runs.Load())
}

// TestKeyHeader: a guarded request without a key is refused with 400, or, with
// WithKeyRequired(false), runs unguarded every time and fires OnUnguarded; a malformed key
// is refused either way; other methods pass through untouched.
func TestKeyHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		method     string
		keys       []string
		optional   bool
		status     int
		typ        string
		runs       int64 // after two requests
		unguarded  int
		headerName string
	}{
		{name: "missing", method: http.MethodPost, status: 400, typ: idemhttp.ProblemMissingKey},
		{name: "missing, optional", method: http.MethodPost, optional: true, status: 201, runs: 2, unguarded: 2},
		{name: "empty", method: http.MethodPost, keys: []string{""}, status: 400, typ: idemhttp.ProblemInvalidKey},
		{name: "too long", method: http.MethodPost, keys: []string{strings.Repeat("k", 256)}, status: 400, typ: idemhttp.ProblemInvalidKey},
		{name: "not printable", method: http.MethodPost, keys: []string{"ключ"}, status: 400, typ: idemhttp.ProblemInvalidKey},
		{name: "two values", method: http.MethodPost, keys: []string{"a", "b"}, status: 400, typ: idemhttp.ProblemInvalidKey},
		{name: "two values, optional", method: http.MethodPost, keys: []string{"a", "b"}, optional: true, status: 400, typ: idemhttp.ProblemInvalidKey},
		{name: "repeated, same", method: http.MethodPost, keys: []string{"a", `"a"`}, status: 201, runs: 1},
		{name: "parameters are ignored", method: http.MethodPost, keys: []string{`"a";v=1`, "a", `"a"; b=?0;c="x,y"`}, status: 201, runs: 1},
		{name: "malformed parameters", method: http.MethodPost, keys: []string{`"a";V=1`}, status: 400, typ: idemhttp.ProblemInvalidKey},
		{name: "longest", method: http.MethodPost, keys: []string{strings.Repeat("k", 255)}, status: 201, runs: 1},
		{name: "PATCH is guarded", method: http.MethodPatch, keys: []string{"a"}, status: 201, runs: 1},
		{name: "PUT passes through", method: http.MethodPut, keys: []string{"a"}, status: 201, runs: 2},
		{name: "GET without a key passes through", method: http.MethodGet, status: 201, runs: 2},
		{name: "other header name", method: http.MethodPost, keys: []string{"a"}, headerName: "X-Request-Key", status: 201, runs: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var hooks hookEvents
			var logs logRecords
			h := created()
			opts := []idemhttp.Option{idemhttp.WithKeyRequired(!tc.optional)}
			header := "Idempotency-Key"
			if tc.headerName != "" {
				header = tc.headerName
				opts = append(opts, idemhttp.WithHeader(header))
			}
			g := memGuard(t, idem.WithHooks(hooks.hooks()), idem.WithLogger(slog.New(&logs)))
			srv := serve(t, g, h, opts...)
			for range 2 {
				req, err := http.NewRequest(tc.method, srv.URL+"/orders", strings.NewReader(`{}`))
				require.NoError(t, err)
				for _, k := range tc.keys {
					req.Header.Add(header, k)
				}
				got := do(t, req)
				if tc.typ != "" {
					checkProblem(t, got, tc.status, tc.typ)
				} else {
					assert.Equal(t, tc.status, got.status)
				}
			}
			assert.Equal(t, tc.runs, h.runs.Load())
			assert.Equal(t, tc.unguarded, hooks.count("unguarded"))
			for _, err := range hooks.errs {
				assert.ErrorIs(t, err, idem.ErrMissingKey)
			}
			if tc.unguarded > 0 {
				assert.Equal(t, []string{
					"WARN idemhttp: no idempotency key; running the handler unguarded",
					"WARN idemhttp: no idempotency key; running the handler unguarded",
				}, logs.messages())
			}
		})
	}
}

// TestRequestBody: the handler reads the body the middleware read to fingerprint the
// request; a body over WithMaxRequestBody is refused with 413 before anything runs, and
// one that cannot be read with 400; an unguarded request's body is not read.
func TestRequestBody(t *testing.T) {
	t.Parallel()
	h := created()
	srv := serve(t, memGuard(t), h, idemhttp.WithMaxRequestBody(16))

	got := send(t, http.MethodPost, srv.URL, "k-1", "exactly 16 bytes")
	assert.Equal(t, http.StatusCreated, got.status)
	assert.Contains(t, got.body, `"got":"exactly 16 bytes"`)

	checkProblem(t, send(t, http.MethodPost, srv.URL, "k-2", "seventeen bytes!!"), http.StatusRequestEntityTooLarge, idemhttp.ProblemRequestTooLarge)
	assert.Equal(t, int64(1), h.runs.Load(), "the large request did not run")
	got = send(t, http.MethodPut, srv.URL, "k-3", "a body larger than the limit, not read")
	assert.Equal(t, http.StatusCreated, got.status, "unguarded: not read")
	assert.Contains(t, got.body, "not read")

	mw, err := idemhttp.Middleware(memGuard(t))
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader("{"), errReader{}))
	req.Header.Set("Idempotency-Key", "k-1")
	mw(h).ServeHTTP(rec, req)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), idemhttp.ProblemInvalidRequest)
	assert.Equal(t, int64(2), h.runs.Load())
}

// errReader fails every read, as a client that goes away mid-body.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// TestTenant: with WithTenant, the same key from two tenants is two records; without it,
// one record.
func TestTenant(t *testing.T) {
	t.Parallel()
	user := func(r *http.Request) string { return r.Header.Get("X-User") }
	for _, tc := range []struct {
		name string
		opts []idemhttp.Option
		runs int64
	}{
		{name: "scoped", opts: []idemhttp.Option{idemhttp.WithTenant(user)}, runs: 2},
		{name: "not scoped", runs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := created()
			srv := serve(t, memGuard(t), h, tc.opts...)
			for _, u := range []string{"alice", "bob", "alice"} {
				req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(nil))
				require.NoError(t, err)
				req.Header.Set("Idempotency-Key", "k-1")
				req.Header.Set("X-User", u)
				assert.Equal(t, http.StatusCreated, do(t, req).status)
			}
			assert.Equal(t, tc.runs, h.runs.Load())
		})
	}
}

// TestHandlerContext: the handler runs with the guard's lease in its request's context, so
// idem.Checkpoint works; a handler that meets idem's errors answers them itself (409 or
// 503), which is not stored, so the retry runs again.
func TestHandlerContext(t *testing.T) {
	t.Parallel()
	store := storetest.NewFaulty(memstore.New())
	h := &counter{answer: func(n int64, w http.ResponseWriter, r *http.Request) {
		if err := idem.Checkpoint(r.Context(), "charged"); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "run %d: %v", n, errors.Is(err, idem.ErrStore))
			return
		}
		fmt.Fprintf(w, "run %d: checkpoint %q", n, idem.LastCheckpoint(r.Context()))
	}}
	srv := serve(t, newGuard(t, store), h)
	store.Fail("checkpoint", errors.New("throttled"), false)
	got := send(t, http.MethodPost, srv.URL, "k-1", "")
	assert.Equal(t, http.StatusServiceUnavailable, got.status)
	assert.Equal(t, "run 1: true", got.body)
	store.Fail("checkpoint", nil, false)
	got = send(t, http.MethodPost, srv.URL, "k-1", "")
	assert.Equal(t, http.StatusOK, got.status)
	assert.Equal(t, `run 2: checkpoint "charged"`, got.body)
	assert.Equal(t, `run 2: checkpoint "charged"`, send(t, http.MethodPost, srv.URL, "k-1", "").body)
	assert.Equal(t, int64(2), h.runs.Load())
}

// TestHandlerPanics: a handler that panics releases the key (net/http recovers the panic
// and drops the connection), so the retry runs it again.
func TestHandlerPanics(t *testing.T) {
	t.Parallel()
	h := &counter{answer: func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			panic(http.ErrAbortHandler) // net/http recovers it without logging
		}
		w.WriteHeader(http.StatusCreated)
	}}
	srv := serve(t, memGuard(t), h)
	req, err := http.NewRequest(http.MethodPost, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "k-1")
	_, err = http.DefaultClient.Do(req)
	require.Error(t, err, "the connection is dropped")
	assert.Equal(t, http.StatusCreated, send(t, http.MethodPost, srv.URL, "k-1", "").status)
	assert.Equal(t, int64(2), h.runs.Load())
}

// TestFailed: an error with no HTTP meaning (here the caller's context, ended while it
// waited for a duplicate in flight) is answered 500 with a plain problem, and logged.
func TestFailed(t *testing.T) {
	t.Parallel()
	var logs logRecords
	started, finish := make(chan struct{}), make(chan struct{})
	h := &counter{answer: func(int64, http.ResponseWriter, *http.Request) {
		close(started)
		<-finish
	}}
	ctx, cancel := context.WithCancel(t.Context())
	g := memGuard(t, idem.WithWait(time.Minute, time.Minute),
		idem.WithLogger(slog.New(&logs)),
		// The second request, found in flight, is about to wait: its client goes away.
		idem.WithHooks(idem.Hooks{OnInProgress: func(context.Context, idem.Event) { cancel() }}))
	mw, err := idemhttp.Middleware(g)
	require.NoError(t, err)
	serveOne := func(ctx context.Context) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
		req.Header.Set("Idempotency-Key", "k-1")
		mw(h).ServeHTTP(rec, req)
		return rec
	}
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- serveOne(t.Context()) }()
	<-started
	rec := serveOne(ctx)
	close(finish)
	assert.Equal(t, http.StatusOK, (<-done).Code)

	assert.Equal(t, http.StatusInternalServerError, rec.Code)
	assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	assert.JSONEq(t, `{"type":"about:blank","title":"Internal Server Error","status":500}`, rec.Body.String())
	assert.Equal(t, []string{"WARN idemhttp: request failed"}, logs.messages())
	assert.Equal(t, int64(1), h.runs.Load())
}
