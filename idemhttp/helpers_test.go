package idemhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// newGuard returns a guard over store, which each test has to itself.
func newGuard(t testing.TB, store idemstore.Store, opts ...idem.Option) *idem.Guard {
	t.Helper()
	g, err := idem.New(store, "orders", opts...)
	require.NoError(t, err)
	return g
}

// memGuard returns a guard over a fresh in-memory store.
func memGuard(t testing.TB, opts ...idem.Option) *idem.Guard {
	t.Helper()
	return newGuard(t, memstore.New(), opts...)
}

// serve starts a real HTTP server on 127.0.0.1 whose handler is h behind the middleware.
func serve(t testing.TB, g *idem.Guard, h http.Handler, opts ...idemhttp.Option) *httptest.Server {
	t.Helper()
	mw, err := idemhttp.Middleware(g, opts...)
	require.NoError(t, err)
	return serveHandler(t, mw(h))
}

// serveHandler starts a real HTTP server on 127.0.0.1 for h, closed when t ends.
func serveHandler(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// counter is a handler that counts its runs and answers with what answer writes.
type counter struct {
	runs   atomic.Int64
	answer func(n int64, w http.ResponseWriter, r *http.Request)
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.answer(c.runs.Add(1), w, r)
}

// created is a handler that answers 201 with the run's number and the request's body.
func created() *counter {
	return &counter{answer: func(n int64, w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"run": n, "got": string(body)})
	}}
}

// hold holds a handler's first run until the duplicates sent meanwhile are answered.
type hold struct{ started, finish chan struct{} }

func newHold() *hold { return &hold{started: make(chan struct{}), finish: make(chan struct{})} }

// wait, called by the handler, holds it; a second call panics, as a second run must not
// happen.
func (h *hold) wait() {
	close(h.started)
	<-h.finish
}

// duplicates sends a POST, then n duplicates of it at once while the handler holds the
// first, and returns the first's response and the duplicates'.
func (h *hold) duplicates(t testing.TB, url, key, body string, n int) (response, []response) {
	t.Helper()
	first := make(chan response)
	go func() { first <- send(t, http.MethodPost, url, key, body) }()
	<-h.started
	var wg sync.WaitGroup
	dups := make([]response, n)
	for i := range dups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dups[i] = send(t, http.MethodPost, url, key, body)
		}()
	}
	wg.Wait()
	close(h.finish)
	return <-first, dups
}

// checkInProgress asserts that each duplicate got 409 ProblemInProgress with a
// Retry-After of whole seconds, at least one.
func checkInProgress(t testing.TB, dups []response) {
	t.Helper()
	for i, d := range dups {
		checkProblem(t, d, http.StatusConflict, idemhttp.ProblemInProgress)
		retry, err := strconv.Atoi(d.header.Get("Retry-After"))
		require.NoError(t, err, "duplicate %d: Retry-After %q", i, d.header.Get("Retry-After"))
		assert.Positive(t, retry, "duplicate %d", i)
	}
}

// response is what the client read.
type response struct {
	status int
	header http.Header
	body   string
	dump   string // the response as it came off the wire, without its Date
}

// send sends a request with the key (none if empty) and body, and reads the response.
func send(t testing.TB, method, url, key, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return do(t, req)
}

func do(t testing.TB, req *http.Request) response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	dump, err := httputil.DumpResponse(resp, true)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Header.Del("Date")
	return response{status: resp.StatusCode, header: resp.Header, body: string(b), dump: withoutDate(dump)}
}

// withoutDate removes the Date line, which the server writes afresh on every response.
func withoutDate(dump []byte) string {
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(dump, []byte("\r\n")) {
		if !bytes.HasPrefix(line, []byte("Date: ")) {
			out.Write(line)
		}
	}
	return out.String()
}

// checkProblem asserts r is a problem details answer of status and type.
func checkProblem(t testing.TB, r response, status int, typ string) {
	t.Helper()
	assert.Equal(t, status, r.status, "body: %s", r.body)
	assert.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.body), &p), r.body)
	assert.Equal(t, typ, p["type"])
	assert.Equal(t, float64(status), p["status"])
	assert.Equal(t, http.StatusText(status), p["title"])
}

// logRecords is a slog.Handler that keeps the level and message of every record.
type logRecords struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }

func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Level.String()+" "+r.Message)
	return nil
}

// messages returns the level and message of each record.
func (l *logRecords) messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// hookEvents counts a guard's hook events by name.
type hookEvents struct {
	mu     sync.Mutex
	counts map[string]int
	errs   []error
}

func (h *hookEvents) hooks() idem.Hooks {
	on := func(name string) func(context.Context, idem.Event) {
		return func(_ context.Context, e idem.Event) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.counts == nil {
				h.counts = map[string]int{}
			}
			h.counts[name]++
			if name == "unguarded" {
				h.errs = append(h.errs, e.Err)
			}
		}
	}
	return idem.Hooks{OnClaimed: on("claimed"), OnCompleted: on("completed"), OnReplayed: on("replayed"),
		OnReleased: on("released"), OnUnguarded: on("unguarded")}
}

func (h *hookEvents) count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[name]
}
