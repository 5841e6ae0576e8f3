package httpsem

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestAdmit: a request is guarded with its key, bypassed when its method is not guarded
// or its missing key is optional, and answered 400 when its key is missing and required,
// or malformed.
func TestAdmit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		method   string
		headers  map[string][]string
		optional bool
		verdict  Verdict
		key      string
		status   int
	}{
		{name: "guarded", method: "post", headers: map[string][]string{"idempotency-key": {"k"}}, verdict: Guarded, key: "k"},
		{name: "not a guarded method", method: http.MethodGet, headers: map[string][]string{"Idempotency-Key": {"a", "b"}}, verdict: Bypassed},
		{name: "missing", method: http.MethodPost, verdict: Answered, status: 400},
		{name: "missing, optional", method: http.MethodPost, optional: true, verdict: Bypassed},
		{name: "malformed, optional", method: http.MethodPatch, headers: map[string][]string{"Idempotency-Key": {""}}, optional: true, verdict: Answered, status: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := testGuard(t, &countingHandler{})
			g.s.KeyRequired = !tc.optional
			key, v, resp := g.Admit(context.Background(), &Request{Method: tc.method, MultiHeaders: tc.headers, MultiValue: true})
			assert.Equal(t, tc.verdict, v)
			assert.Equal(t, tc.key, key)
			assert.Equal(t, tc.status, resp.StatusCode)
		})
	}
}

// TestRunNotStored: a response marked NotStored is recorded as done without it: the
// handler does not run again, and the replay is answered 500 ProblemNotReplayable, once
// logged; a marked response that is not cacheable releases the key.
func TestRunNotStored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		runs   int
		answer Verdict
	}{
		{name: "cacheable", status: http.StatusOK, runs: 1, answer: Answered},
		{name: "not cacheable", status: http.StatusBadGateway, runs: 2, answer: Ran},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs countingHandler
			g := testGuard(t, &logs)
			req := &Request{Method: http.MethodPost, MultiValue: true}
			runs := 0
			run := func() (Verdict, Response, error) {
				return g.Run(context.Background(), req, idem.Request{Key: "k"}, nil, func(context.Context) (Response, error) {
					runs++
					return Response{StatusCode: tc.status, NotStored: true}, nil
				})
			}
			v, _, err := run()
			require.NoError(t, err)
			assert.Equal(t, Ran, v)
			v, resp, err := run()
			require.NoError(t, err)
			assert.Equal(t, tc.answer, v)
			assert.Equal(t, tc.runs, runs)
			if tc.answer == Answered {
				assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
				assert.Contains(t, resp.Body, ProblemNotReplayable)
				assert.Equal(t, 2, logs.n, "the ERROR line, and the request's INFO line")
			}
		})
	}
}

// TestRunAborted: a response without a status is a run that gave up, whether the
// handler's context ended or not (a deadline of its own, say: no HTTP response has status
// 0): answered 503 ProblemAborted, logged once at WARN (and the request once at INFO, as
// every refused request), and never stored, even by a guard that remembers every failure;
// the next request runs the handler again.
func TestRunAborted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		ended bool
	}{
		{name: "context ended", ended: true},
		{name: "context alive", ended: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs countingHandler
			ig, err := idem.New(memstore.New(), "test", idem.WithLogger(slog.New(&logs)),
				idem.WithRememberFailures(func(error) bool { return true }))
			require.NoError(t, err)
			g := NewGuard(ig, DefaultSettings("idemhttp"))
			req := &Request{Method: http.MethodPost, MultiValue: true}
			runs := 0
			ctx, cancel := context.WithCancel(context.Background()) // the first request's
			defer cancel()
			handler := func(ctx context.Context) (Response, error) {
				runs++
				if runs == 1 && tc.ended {
					cancel() // its deadline, say
					<-ctx.Done()
				}
				return Response{}, nil
			}
			v, resp, err := g.Run(ctx, req, idem.Request{Key: "k"}, nil, handler)
			require.NoError(t, err)
			assert.Equal(t, Answered, v)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.Contains(t, resp.Body, ProblemAborted)
			assert.Equal(t, []string{"1"}, resp.MultiValueHeaders["Retry-After"])
			assert.Equal(t, 2, logs.n)
			_, _, err = g.Run(context.Background(), req, idem.Request{Key: "k"}, nil, handler)
			require.NoError(t, err)
			assert.Equal(t, 2, runs, "the next request runs the handler again")
		})
	}
}
