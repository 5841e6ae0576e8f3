package idemhttp_test

// Review 2 (hostile review of branches lambdaw and httpmw): each test here pins a way a
// guarded handler ran twice for one key, or a retry got another answer than the first
// run's, and what the middleware does about it now (where it can do nothing, what the
// documentation tells a handler to do instead).

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/internal/httpsem"
	"github.com/idemkit/idem/memstore"
)

// responseBefore12c9cc1 is httpsem.Response as it was before 12c9cc1 added
// multiValueHeadersBase64: the type a binary deployed before that commit decodes a stored
// response into (verbatim, `git show 12c9cc1^:internal/httpsem/response.go`).
type responseBefore12c9cc1 struct {
	StatusCode        int                 `json:"statusCode"`
	StatusDescription string              `json:"statusDescription,omitempty"`
	Headers           map[string]string   `json:"headers"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	Cookies           []string            `json:"cookies"`
	Body              string              `json:"body"`
	IsBase64Encoded   bool                `json:"isBase64Encoded,omitempty"`
	NotStored         bool                `json:"notStored,omitempty"`
}

// TestReviewOlderReaderCannotReplayBinaryHeaders: 12c9cc1 stores the bytes of a header
// value that is not UTF-8 in a new field, multiValueHeadersBase64, and said that a reader
// predating the field replays what it replayed before. It does not: idem's JSONCodec
// decodes with DisallowUnknownFields, so during a rolling deploy (or after a rollback) an
// older instance that meets such a record fails with idem.ErrIncompatibleRecord, which its
// httpsem answered 500 ProblemNotReplayable (as it does now: httpsem's TestGuardProblem,
// "incompatible record"), and never runs the handler: no double execution. Old readers
// cannot be changed, and before 12c9cc1 such a record replayed the header wrongly (as
// U+FFFD) anyway. What keeps the rest replayable is that the field appears only when a
// header has bytes that are not UTF-8: every other record is what the older release
// wrote, and replays there. (The reviewer asserted the binary case replays on the old
// reader; it cannot.)
func TestReviewOlderReaderCannotReplayBinaryHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		disposition string
		replayable  bool // by the older release
	}{
		{name: "binary header: 500 on the older release", disposition: "attachment; filename=\"caf\xe9.txt\""}, // Latin-1
		{name: "UTF-8 headers: no new field, replayed by the older release", disposition: "attachment; filename=\"caf\u00e9.txt\"", replayable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := memstore.New()
			h := &counter{answer: func(n int64, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Disposition", tc.disposition)
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte("file"))
			}}
			g := newGuard(t, store)
			srv := serve(t, g, h)
			first := send(t, http.MethodPost, srv.URL+"/exports", "k-1", `{"a":1}`)
			require.Equal(t, http.StatusCreated, first.status)
			assert.Equal(t, tc.disposition, first.header.Get("Content-Disposition"))

			stored, err := g.StoredKey(idem.Request{Key: "k-1"})
			require.NoError(t, err)
			rec, err := store.Get(t.Context(), stored)
			require.NoError(t, err)
			require.Equal(t, "json", rec.Encoding, "small enough not to be compressed")
			assert.Equal(t, !tc.replayable, strings.Contains(string(rec.Data), `"multiValueHeadersBase64"`),
				"the new field is there only for a header that is not UTF-8: %s", rec.Data)

			// The retry reaches an instance still running the previous release: its guard
			// (same store, same operation) replays the stored response into the type it knows.
			req := httpsem.Request{Method: http.MethodPost, Path: "/exports", MultiValue: true}
			old, replayed, err := idem.Do(t.Context(), newGuard(t, store),
				idem.Request{Key: "k-1", Fingerprint: req.FingerprintBody([]byte(`{"a":1}`))},
				func(context.Context) (responseBefore12c9cc1, error) {
					t.Error("the handler ran again")
					return responseBefore12c9cc1{}, nil
				})
			if !tc.replayable {
				require.ErrorIs(t, err, idem.ErrIncompatibleRecord, "answered 500 not replayable, never a re-run")
				assert.False(t, replayed)
				return
			}
			require.NoError(t, err)
			assert.True(t, replayed)
			assert.Equal(t, http.StatusCreated, old.StatusCode)
			assert.Equal(t, []string{tc.disposition}, old.MultiValueHeaders["Content-Disposition"])
			assert.Equal(t, "file", old.Body)
		})
	}
}

// TestReviewTimeoutHandlerInsideReleasesARunningHandler: a documented limitation.
// http.TimeoutHandler mounted inside the middleware (mw(http.TimeoutHandler(h, d, msg)))
// writes its own 503 when d passes, while h goes on in its own goroutine. The middleware
// sees a 503, which it does not store: the key is released while h still runs, the retry
// claims it and runs h a second time, concurrently with the first. Nothing the
// middleware sees tells that answer from a handler's own 503, so the package doc says to
// mount TimeoutHandler, or any wrapper that answers while the handler goes on, outside
// the middleware. Attached writes stay safe even so: the first run's lease closed when
// the middleware's run returned, so its late idem.Attach fails with idem.ErrNoLease and
// only the retry's writes commit. (The reviewer asserted one run; this pins what happens.)
func TestReviewTimeoutHandlerInsideReleasesARunningHandler(t *testing.T) {
	t.Parallel()
	var effects, attached atomic.Int64 // outside attached writes, and attached
	firstDone := make(chan error, 1)   // the first run's late Attach
	retried := make(chan struct{})
	inner := &counter{answer: func(n int64, w http.ResponseWriter, r *http.Request) {
		effects.Add(1)
		if n == 1 {
			<-retried // slow: still running when TimeoutHandler has answered
		}
		err := idem.Attach(r.Context(), func() error { attached.Add(1); return nil })
		if n == 1 {
			firstDone <- err
			return
		}
		assert.NoError(t, err)
		w.WriteHeader(http.StatusCreated)
	}}
	mw, err := idemhttp.Middleware(memGuard(t))
	require.NoError(t, err)
	srv := serveHandler(t, mw(http.TimeoutHandler(inner, 200*time.Millisecond, "timed out")))

	first := send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`)
	assert.Equal(t, http.StatusServiceUnavailable, first.status)
	assert.Equal(t, "timed out", first.body, "TimeoutHandler's own answer")
	retry := send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`)
	close(retried)
	assert.Equal(t, http.StatusCreated, retry.status, "the key was released: the retry ran, the first still running")
	assert.Empty(t, retry.header.Get("Idempotent-Replayed"))
	require.ErrorIs(t, <-firstDone, idem.ErrNoLease, "the first run's late attach is refused")
	assert.Equal(t, int64(2), inner.runs.Load(), "the limitation: the handler ran twice")
	assert.Equal(t, int64(2), effects.Load(), "so did its effects outside attached writes")
	assert.Equal(t, int64(1), attached.Load(), "attached writes committed once")
}

// TestReviewFlushedThenPanickedRunsAgain: a handler that streamed its answer (flushed a
// status and part of its body) has had its response reach the client; if it then panics
// (panic(http.ErrAbortHandler), net/http's way to break a response off, or any panic),
// the run is recorded as a streamed one: a cacheable status completes the key without
// its response (a retry gets 500 ProblemNotReplayable, the handler never runs twice),
// a 5xx releases it, as for a streamed response that returns. The panic goes on once the
// outcome is recorded: the client's response is cut off. Before the fix the key was
// released and the retry ran the handler, and its side effect, again. So was it when the
// handler hijacked the connection after the flush (and closed it).
func TestReviewFlushedThenPanickedRunsAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		panic  any
		runs   int64 // after the retry
		logged bool  // the panic logged with its stack
	}{
		{name: "201, http.ErrAbortHandler", status: http.StatusCreated, panic: http.ErrAbortHandler, runs: 1},
		{name: "201, other panic", status: http.StatusCreated, panic: "boom", runs: 1, logged: true},
		{name: "502, released as a streamed 5xx", status: http.StatusBadGateway, panic: http.ErrAbortHandler, runs: 2},
		{name: "201, then the connection hijacked and closed", status: http.StatusCreated, runs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &counter{answer: func(n int64, w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(`{"order":"ord-1",`))
				if err := http.NewResponseController(w).Flush(); err != nil { // the client has the status
					panic(err)
				}
				if n == 1 && tc.panic != nil {
					panic(tc.panic) // the stream breaks off
				}
				if n == 1 { // the stream breaks off another way
					conn, _, err := http.NewResponseController(w).Hijack()
					if err != nil {
						panic(err)
					}
					_ = conn.Close()
					return
				}
				_, _ = w.Write([]byte(`"ok":true}`))
			}}
			settled := make(chan struct{}, 1)
			settle := func(context.Context, idem.Event) { settled <- struct{}{} }
			var logs logRecords
			g := memGuard(t, idem.WithHooks(idem.Hooks{OnReleased: settle, OnCompleted: settle}),
				idem.WithLogger(slog.New(&logs)))
			srv := httptest.NewUnstartedServer(mwHandler(t, g, h))
			srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the server logs the panic
			srv.Start()
			t.Cleanup(srv.Close)

			req, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", nil)
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", "k-1")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode, "the status reached the client before the panic")
			_, err = io.ReadAll(resp.Body)
			assert.Error(t, err, "the panic went on: the response is cut off")
			resp.Body.Close()
			<-settled // the outcome is recorded before the panic goes on; wait for the hook

			retry := send(t, http.MethodPost, srv.URL+"/orders", "k-1", ``)
			if tc.runs == 1 {
				checkProblem(t, retry, http.StatusInternalServerError, idemhttp.ProblemNotReplayable)
			} else {
				assert.Equal(t, tc.status, retry.status, "the retry ran again")
			}
			assert.Equal(t, tc.runs, h.runs.Load())
			var stack bool
			for _, m := range logs.messages() {
				stack = stack || strings.Contains(m, "panicked after its response was sent")
			}
			assert.Equal(t, tc.logged, stack, "logs: %v", logs.messages())
		})
	}
}

// mwHandler returns h behind the middleware of g.
func mwHandler(t testing.TB, g *idem.Guard, h http.Handler) http.Handler {
	t.Helper()
	mw, err := idemhttp.Middleware(g)
	require.NoError(t, err)
	return mw(h)
}
