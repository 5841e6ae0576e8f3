package idemhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/idemkit/idem/internal/capture"
	"github.com/idemkit/idem/memstore"
)

// rawKey is a caller's key distinctive enough to be found in any output it reaches.
const rawKey = "RAWKEY-7f3a9c2e-never-logged"

// TestRawKeyNeverLogged drives every failure path of the middleware with a distinctive
// raw key, with the guard logging everything at DEBUG and every hook reporting, and finds
// the key in none of it: a raw key may be personal data, and only its hash (the stored
// key) ever leaves the process. Each case checks the answer of its path, so that the path
// was taken.
func TestRawKeyNeverLogged(t *testing.T) {
	t.Parallel()
	errDown := errors.New("store: connection refused")
	notCommitted := fmt.Errorf("store: transaction cancelled: %w", idemstore.ErrNotCommitted)
	created := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }
	streamed := func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "event: 1\n\n")
		w.(http.Flusher).Flush()
	}
	tests := []struct {
		name  string
		guard []idem.Option
		fail  func(s *storetest.Faulty)
		h     http.HandlerFunc
		// run sends the requests of the case and checks the answers.
		run func(t *testing.T, url string)
		// logged is in the output when the path was taken and reported.
		logged string
	}{
		{name: "key too long", h: created, run: func(t *testing.T, url string) {
			checkProblem(t, send(t, http.MethodPost, url, rawKey+strings.Repeat("x", 256), ""), 400, idemhttp.ProblemInvalidKey)
		}},
		{name: "malformed parameters", h: created, run: func(t *testing.T, url string) {
			checkProblem(t, send(t, http.MethodPost, url, `"`+rawKey+`";V=1`, ""), 400, idemhttp.ProblemInvalidKey)
		}},
		{name: "key with parameters", h: created, run: func(t *testing.T, url string) {
			assert.Equal(t, 201, send(t, http.MethodPost, url, `"`+rawKey+`";v=1`, "").status)
			assert.Equal(t, "true", send(t, http.MethodPost, url, rawKey, "").header.Get("Idempotent-Replayed"))
		}},
		{name: "request body too large", h: created, run: func(t *testing.T, url string) {
			checkProblem(t, send(t, http.MethodPost, url, rawKey, strings.Repeat("x", 2048)), 413, idemhttp.ProblemRequestTooLarge)
		}},
		{name: "key reused", logged: "OnMismatch", h: created, run: func(t *testing.T, url string) {
			assert.Equal(t, 201, send(t, http.MethodPost, url, rawKey, `{"a":1}`).status)
			checkProblem(t, send(t, http.MethodPost, url, rawKey, `{"a":2}`), 422, idemhttp.ProblemKeyReused)
		}},
		{name: "store down before the run", logged: "idempotency store failed", fail: func(s *storetest.Faulty) { s.Fail("claim", errDown, false) }, h: created,
			run: func(t *testing.T, url string) {
				checkProblem(t, send(t, http.MethodPost, url, rawKey, ""), 503, idemhttp.ProblemStoreUnavailable)
			}},
		{name: "store down, fail-open", logged: "fail-open", guard: []idem.Option{idem.WithFailOpen(true)},
			fail: func(s *storetest.Faulty) { s.Fail("claim", errDown, false) }, h: created, run: func(t *testing.T, url string) {
				assert.Equal(t, 201, send(t, http.MethodPost, url, rawKey, "").status)
			}},
		{name: "completion fails", logged: "completion failed", fail: func(s *storetest.Faulty) { s.Fail("complete", errDown, false) }, h: created,
			run: func(t *testing.T, url string) {
				assert.Equal(t, 201, send(t, http.MethodPost, url, rawKey, "").status)
				checkProblem(t, send(t, http.MethodPost, url, rawKey, ""), 409, idemhttp.ProblemInProgress)
			}},
		{name: "completion not committed", logged: "completion not committed", fail: func(s *storetest.Faulty) { s.Fail("complete", notCommitted, false) }, h: created,
			run: func(t *testing.T, url string) {
				checkProblem(t, send(t, http.MethodPost, url, rawKey, ""), 503, idemhttp.ProblemNotCommitted)
			}},
		{name: "completion finds the lease lost", logged: "lease lost", fail: func(s *storetest.Faulty) { s.Fail("complete", idem.ErrLeaseLost, false) }, h: created,
			run: func(t *testing.T, url string) {
				checkProblem(t, send(t, http.MethodPost, url, rawKey, ""), 409, idemhttp.ProblemLeaseLost)
			}},
		{name: "streamed, completion not committed (response already sent)", logged: "response already sent",
			fail: func(s *storetest.Faulty) { s.Fail("complete", notCommitted, false) }, h: streamed, run: func(t *testing.T, url string) {
				assert.Equal(t, 200, send(t, http.MethodPost, url, rawKey, "").status)
			}},
		{name: "streamed, completion fails", logged: "completion failed", fail: func(s *storetest.Faulty) { s.Fail("complete", errDown, false) }, h: streamed,
			run: func(t *testing.T, url string) {
				assert.Equal(t, 200, send(t, http.MethodPost, url, rawKey, "").status)
			}},
		{name: "streamed, then not replayable", logged: "cannot be replayed", h: streamed, run: func(t *testing.T, url string) {
			assert.Equal(t, 200, send(t, http.MethodPost, url, rawKey, "").status)
			checkProblem(t, send(t, http.MethodPost, url, rawKey, ""), 500, idemhttp.ProblemNotReplayable)
		}},
		{name: "handler answers 500, release fails", logged: "release failed", fail: func(s *storetest.Faulty) { s.Fail("release", errDown, false) },
			h: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }, run: func(t *testing.T, url string) {
				assert.Equal(t, 500, send(t, http.MethodPost, url, rawKey, "").status)
			}},
		{name: "checkpoint fails", logged: "Op:checkpoint", fail: func(s *storetest.Faulty) { s.Fail("checkpoint", errDown, false) },
			h: func(w http.ResponseWriter, r *http.Request) {
				if err := idem.Checkpoint(r.Context(), "charged"); err != nil {
					http.Error(w, err.Error(), http.StatusServiceUnavailable)
				}
			}, run: func(t *testing.T, url string) {
				assert.Equal(t, 503, send(t, http.MethodPost, url, rawKey, "").status)
			}},
		{name: "handler panics", logged: "OnReleased", h: func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) },
			run: func(t *testing.T, url string) {
				req, err := http.NewRequest(http.MethodPost, url, nil)
				require.NoError(t, err)
				req.Header.Set("Idempotency-Key", rawKey)
				_, err = http.DefaultClient.Do(req)
				require.Error(t, err, "the connection is dropped")
			}},
		{name: "handler gives up when the lease runs out", logged: "gave up",
			guard: []idem.Option{idem.WithLease(10 * time.Millisecond), idem.WithLeaseMargin(10 * time.Millisecond)},
			h:     func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, run: func(t *testing.T, url string) {
				checkProblem(t, send(t, http.MethodPost, url, rawKey, ""), 503, idemhttp.ProblemAborted)
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out capture.Output
			store := storetest.NewFaulty(memstore.New())
			if tc.fail != nil {
				tc.fail(store)
			}
			g := newGuard(t, store, append(out.Options(), tc.guard...)...)
			srv := serve(t, g, tc.h, idemhttp.WithMaxRequestBody(1024))
			tc.run(t, srv.URL+"/orders")
			srv.Close() // every handler has returned
			assert.Contains(t, out.String(), tc.logged, "the path reported")
			assert.NotContains(t, out.String(), rawKey)
		})
	}

	t.Run("hijacked", func(t *testing.T) {
		t.Parallel()
		var out capture.Output
		released := make(chan struct{}, 1)
		hooks := out.Hooks()
		onReleased := hooks.OnReleased
		hooks.OnReleased = func(ctx context.Context, e idem.Event) { onReleased(ctx, e); released <- struct{}{} }
		g := memGuard(t, idem.WithLogger(out.Logger()), idem.WithHooks(hooks))
		srv := serve(t, g, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			conn, rw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			defer func() { _ = conn.Close() }()
			_, _ = io.WriteString(rw, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			_ = rw.Flush()
		}))
		assert.Equal(t, 200, send(t, http.MethodPost, srv.URL, rawKey, "").status)
		<-released
		assert.NotContains(t, out.String(), rawKey)
	})

	t.Run("stored response corrupt", func(t *testing.T) {
		t.Parallel()
		var out capture.Output
		store := memstore.New()
		_, _, err := idem.Do(t.Context(), newGuard(t, store), idem.Request{Key: rawKey},
			func(context.Context) (json.RawMessage, error) {
				return json.RawMessage(`{"statusCode":200,"body":"%%%","isBase64Encoded":true}`), nil
			})
		require.NoError(t, err)
		srv := serve(t, newGuard(t, store, out.Options()...), http.HandlerFunc(created))
		checkProblem(t, send(t, http.MethodPost, srv.URL, rawKey, ""), 500, idemhttp.ProblemNotReplayable)
		assert.Contains(t, out.String(), "cannot be replayed", "the path logged")
		assert.NotContains(t, out.String(), rawKey)
	})

	t.Run("client gone while waiting for the key in flight", func(t *testing.T) {
		t.Parallel()
		var out capture.Output
		started, finish := make(chan struct{}), make(chan struct{})
		ctx, cancel := context.WithCancel(t.Context())
		hooks := out.Hooks()
		onInProgress := hooks.OnInProgress
		hooks.OnInProgress = func(ctx context.Context, e idem.Event) { onInProgress(ctx, e); cancel() }
		g := memGuard(t, idem.WithWait(time.Minute, time.Minute), idem.WithLogger(out.Logger()), idem.WithHooks(hooks))
		mw, err := idemhttp.Middleware(g)
		require.NoError(t, err)
		h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			close(started)
			<-finish
		}))
		serveOne := func(ctx context.Context) int {
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
			req.Header.Set("Idempotency-Key", rawKey)
			h.ServeHTTP(rec, req)
			return rec.Code
		}
		first := make(chan int)
		go func() { first <- serveOne(t.Context()) }()
		<-started
		assert.Equal(t, 500, serveOne(ctx))
		close(finish)
		assert.Equal(t, 200, <-first)
		assert.Contains(t, out.String(), "request failed", "the path logged")
		assert.NotContains(t, out.String(), rawKey)
	})

	t.Run("in progress", func(t *testing.T) {
		t.Parallel()
		var out capture.Output
		held := newHold()
		srv := serve(t, memGuard(t, out.Options()...), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			held.wait()
			w.WriteHeader(http.StatusCreated)
		}))
		first, dups := held.duplicates(t, srv.URL, rawKey, "", 2)
		assert.Equal(t, 201, first.status)
		checkInProgress(t, dups)
		assert.NotContains(t, out.String(), rawKey)
	})
}
