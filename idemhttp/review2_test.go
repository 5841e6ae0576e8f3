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
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// TestReviewFlushedThenPanickedRunsAgain: a handler that streamed its answer (flushed a
// status and part of its body) has had its response reach the client; if it then panics
// (panic(http.ErrAbortHandler), net/http's way to break a response off, or any panic),
// the run is recorded as a streamed one: a cacheable status completes the key without
// its response (a retry gets 500 ProblemNotReplayable, the handler never runs twice),
// a 5xx releases it, as for a streamed response that returns. The panic goes on once the
// outcome is recorded: the client's response is cut off. Before the fix the key was
// released and the retry ran the handler, and its side effect, again.
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &counter{answer: func(n int64, w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(`{"order":"ord-1",`))
				http.NewResponseController(w).Flush() // the client has the status
				if n == 1 {
					panic(tc.panic) // the stream breaks off
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
