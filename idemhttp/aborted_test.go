package idemhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// TestAbortedRunReleasesTheKey: a handler whose context ends (the lease watchdog at the
// end of the lease, a server deadline such as http.TimeoutHandler's) and that returns
// without writing, the net/http idiom for giving up, did not answer: nothing is stored,
// the key is released and the client is answered 503 ProblemAborted with Retry-After, so
// the retry runs the handler again. Stored as a 200 with an empty body, the work would be
// reported done, and replayed so, for the whole expiry window, without ever being done.
// A handler that writes after its context ended has answered, and that is stored.
func TestAbortedRunReleasesTheKey(t *testing.T) {
	t.Parallel()
	// giveUp waits for the end of its context on the first run and writes nothing; later
	// runs answer 201.
	giveUp := func() *counter {
		return &counter{answer: func(n int64, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				<-r.Context().Done()
				return
			}
			w.WriteHeader(http.StatusCreated)
		}}
	}

	t.Run("lease watchdog", func(t *testing.T) {
		t.Parallel()
		var hooks hookEvents
		// The shortest lease (1 s): the watchdog ends the handler's context at its end
		// less the margin.
		g := memGuard(t, idem.WithLease(10*time.Millisecond), idem.WithLeaseMargin(10*time.Millisecond),
			idem.WithHooks(hooks.hooks()))
		h := giveUp()
		srv := serve(t, g, h)
		first := send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`)
		checkProblem(t, first, http.StatusServiceUnavailable, idemhttp.ProblemAborted)
		assert.Equal(t, "1", first.header.Get("Retry-After"))
		assert.Equal(t, 0, hooks.count("completed"), "nothing stored")
		assert.Equal(t, 1, hooks.count("released"))

		retry := send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`)
		assert.Equal(t, http.StatusCreated, retry.status)
		assert.Empty(t, retry.header.Get("Idempotent-Replayed"))
		assert.Equal(t, int64(2), h.runs.Load())
	})

	t.Run("request deadline", func(t *testing.T) {
		t.Parallel()
		h := giveUp()
		mw, err := idemhttp.Middleware(memGuard(t))
		require.NoError(t, err)
		serveOne := func(ctx context.Context) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", nil)
			req.Header.Set("Idempotency-Key", "k-1")
			mw(h).ServeHTTP(rec, req)
			return rec
		}
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond) // ample for an in-memory claim
		defer cancel()
		first := serveOne(ctx)
		assert.Equal(t, http.StatusServiceUnavailable, first.Code, "body %s", first.Body)
		assert.Equal(t, "application/problem+json", first.Header().Get("Content-Type"))
		assert.Contains(t, first.Body.String(), idemhttp.ProblemAborted)
		assert.Equal(t, http.StatusCreated, serveOne(t.Context()).Code, "the retry runs again")
		assert.Equal(t, int64(2), h.runs.Load())
	})

	t.Run("http.TimeoutHandler", func(t *testing.T) {
		t.Parallel()
		h := giveUp()
		// TimeoutHandler answers the client when its deadline passes, while the run is
		// still ending: the client waits for the outcome to be recorded (the release, or
		// the completion it must not be) before it retries.
		settled := make(chan struct{}, 1)
		settle := func(context.Context, idem.Event) { settled <- struct{}{} }
		g := memGuard(t, idem.WithHooks(idem.Hooks{OnReleased: settle, OnCompleted: settle}))
		mw, err := idemhttp.Middleware(g)
		require.NoError(t, err)
		srv := serveHandler(t, http.TimeoutHandler(mw(h), 300*time.Millisecond, "timed out")) // ample for an in-memory claim
		first := send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`)
		assert.Equal(t, http.StatusServiceUnavailable, first.status, "TimeoutHandler's own answer")
		<-settled
		retry := send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`)
		assert.Equal(t, http.StatusCreated, retry.status, "the retry runs again, body %q", retry.body)
		assert.Empty(t, retry.header.Get("Idempotent-Replayed"))
		assert.Equal(t, int64(2), h.runs.Load())
	})

	t.Run("written after the context ended (control: stored)", func(t *testing.T) {
		t.Parallel()
		h := &counter{answer: func(n int64, w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			w.WriteHeader(http.StatusAccepted)
		}}
		g := memGuard(t, idem.WithLease(10*time.Millisecond), idem.WithLeaseMargin(10*time.Millisecond))
		srv := serve(t, g, h)
		assert.Equal(t, http.StatusAccepted, send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`).status)
		retry := send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`)
		assert.Equal(t, http.StatusAccepted, retry.status)
		assert.Equal(t, "true", retry.header.Get("Idempotent-Replayed"))
		assert.Equal(t, int64(1), h.runs.Load())
	})
}
