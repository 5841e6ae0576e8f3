package idemhttp_test

import (
	"context"
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
)

// TestClientDisconnectDoesNotEndTheRun: WithHeartbeat promises to extend the lease
// "while the handler runs", and the package doc tells a handler that may run longer than
// WithLease to use it. But the lease watchdog runs under the request's context: when the
// client goes away (the very moment a client starts retrying), net/http cancels
// r.Context(), the watchdog stops, no beat follows, and the lease lapses while the handler
// is still running (here finishing a step that, once begun, must complete; the common
// context.WithoutCancel pattern). The client's retry then claims the key and runs the
// handler a second time, concurrently with the first run.
//
// Interleaving: t0 request 1 claims k (lease: the 1 s minimum), handler starts a 3 s
// non-interruptible step; t0+~20ms client 1 disconnects -> r.Context() cancelled ->
// watchdog's watchCtx done -> heartbeat stops; t0+1s lease lapses; t0+1.5s retry
// claims k and runs the handler while run 1 is still inside its step.
func TestClientDisconnectDoesNotEndTheRun(t *testing.T) {
	t.Run("client stays (control: passes)", func(t *testing.T) { disconnectCase(t, false) })
	t.Run("client disconnects", func(t *testing.T) { disconnectCase(t, true) })
}

func disconnectCase(t *testing.T, disconnect bool) {
	g := memGuard(t, idem.WithLease(300*time.Millisecond), idem.WithLeaseMargin(50*time.Millisecond),
		idem.WithHeartbeat(50*time.Millisecond))
	var runs, running, overlap atomic.Int64
	started := make(chan struct{}, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if running.Add(1) > 1 {
			overlap.Add(1)
		}
		defer running.Add(-1)
		started <- struct{}{}
		// Once begun, the charge completes whether or not the client waits for it.
		ctx := context.WithoutCancel(r.Context())
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
		}
		w.WriteHeader(http.StatusCreated)
	})
	srv := serve(t, g, h)

	ctx1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan struct{})
	go func() {
		defer close(done1)
		req, _ := http.NewRequestWithContext(ctx1, http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"a":1}`))
		req.Header.Set("Idempotency-Key", "k-disc")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	t.Logf("%s started", time.Now().Format("05.000"))
	time.Sleep(20 * time.Millisecond)
	if disconnect {
		cancel1() // the client gives up and will retry
		<-done1
	}

	time.Sleep(1500 * time.Millisecond) // many heartbeat intervals: a live heartbeat keeps the key in progress
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"a":1}`))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "k-disc")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	t.Logf("%s retry: %d", time.Now().Format("05.000"), resp.StatusCode)
	assert.Equal(t, http.StatusConflict, resp.StatusCode, "the first run is still running: the retry must be told 409 in progress")
	assert.Equal(t, int64(0), overlap.Load(), "the handler ran twice at once for one key")
	assert.Equal(t, int64(1), runs.Load(), "runs")
	<-done1
	time.Sleep(200 * time.Millisecond)
	cancel1()
}

// TestEarlyHintHeadersStayWithTheHint: WriteHeader(103) copies the handler's
// headers into the server's writer, where they stay. A header the handler sets for the
// early hint and removes before its final status (as net/http lets it: the header map is
// the handler's) still goes out with the first response, from the server's map, but not
// with the stored one: the first response and its replay differ, and the first differs from
// what the handler wrote.
//
// Interleaving: handler sets Link, WriteHeader(103) -> recorder copies Link into w.Header();
// handler deletes Link, WriteHeader(201) -> recorder snapshots headers without Link; commit
// copies the snapshot into w.Header(), which still holds Link -> first response has Link;
// the replay is built from the snapshot -> no Link.
func TestEarlyHintHeadersStayWithTheHint(t *testing.T) {
	h := &counter{answer: func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("ok"))
	}}
	// Control: net/http alone sends no Link with the final response.
	bare := send(t, http.MethodPost, serveHandler(t, h).URL+"/orders", "k-hints", `{}`)
	require.Empty(t, bare.header.Values("Link"), "control: net/http without the middleware")
	h.runs.Store(0)

	srv := serve(t, memGuard(t), h)
	first := send(t, http.MethodPost, srv.URL+"/orders", "k-hints", `{}`)
	replay := send(t, http.MethodPost, srv.URL+"/orders", "k-hints", `{}`)
	assert.Equal(t, int64(1), h.runs.Load())
	assert.Empty(t, first.header.Values("Link"), "the handler removed Link before its final status")
	assert.Equal(t, first.dump, strings.Replace(replay.dump, "Idempotent-Replayed: true\r\n", "", 1), "replay byte for byte")
}

// TestRunKeepsTheRequestDeadline: the run no longer ends with the client, but a deadline on
// the request's context (a server's timeout) still bounds the handler and its lease.
func TestRunKeepsTheRequestDeadline(t *testing.T) {
	t.Parallel()
	g := memGuard(t)
	mw, err := idemhttp.Middleware(g)
	require.NoError(t, err)
	deadline := time.Now().Add(time.Hour)
	var got time.Time
	var ok bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok = r.Context().Deadline()
		w.WriteHeader(http.StatusCreated)
	})
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
	req.Header.Set("Idempotency-Key", "k-deadline")
	rec := httptest.NewRecorder()
	mw(h).ServeHTTP(rec, req)
	require.Equal(t, http.StatusCreated, rec.Code)
	require.True(t, ok, "the handler's context has a deadline")
	assert.False(t, got.After(deadline), "no later than the request's: %v > %v", got, deadline)
}
