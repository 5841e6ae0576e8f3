package lambdawrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// TestProblem: a problem details answer has its status, type, title and detail in a JSON
// body, Retry-After in whole seconds rounded up, and its headers in the map the
// integration reads.
func TestProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		retryAfter time.Duration
		multi      bool
		want       string // Retry-After
	}{
		{name: "no wait"},
		{name: "whole seconds", retryAfter: 3 * time.Second, want: "3"},
		{name: "rounded up", retryAfter: 1500 * time.Millisecond, want: "2"},
		{name: "under a second", retryAfter: time.Millisecond, want: "1"},
		{name: "multi-value headers", retryAfter: time.Second, multi: true, want: "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := problem(http.StatusConflict, ProblemInProgress, "busy", tc.retryAfter, tc.multi)
			assert.Equal(t, http.StatusConflict, r.StatusCode)
			assert.Equal(t, "409 Conflict", r.StatusDescription)
			headers := r.Headers
			if tc.multi {
				assert.Nil(t, r.Headers, "a multi-value load balancer reads only MultiValueHeaders")
				headers = map[string]string{}
				for k, vs := range r.MultiValueHeaders {
					require.Len(t, vs, 1, k)
					headers[k] = vs[0]
				}
			} else {
				assert.Nil(t, r.MultiValueHeaders)
			}
			assert.Equal(t, "application/problem+json", headers["Content-Type"])
			assert.Equal(t, tc.want, headers["Retry-After"])
			var body map[string]any
			require.NoError(t, json.Unmarshal([]byte(r.Body), &body))
			assert.Equal(t, map[string]any{"type": ProblemInProgress, "title": "Conflict", "status": float64(409), "detail": "busy"}, body)
		})
	}
}

// TestGuardProblem is the table of the package documentation, from the guard's side: each
// error of the guard gets its status, problem type and Retry-After, and the ones that no
// other party logs are logged once.
func TestGuardProblem(t *testing.T) {
	t.Parallel()
	storeErr := &idem.StoreError{Op: "claim", Err: errors.New("connection refused")}
	tests := []struct {
		name   string
		err    error
		status int
		typ    string
		retry  string
		logged bool
		none   bool // no HTTP meaning
	}{
		{name: "in progress", err: &idem.InProgressError{RetryAfter: 7 * time.Second}, status: 409, typ: ProblemInProgress, retry: "7"},
		{name: "payload mismatch", err: idem.ErrPayloadMismatch, status: 422, typ: ProblemKeyReused},
		{name: "lease lost", err: fmt.Errorf("complete: %w", idem.ErrLeaseLost), status: 409, typ: ProblemLeaseLost, retry: "1"},
		{name: "attached write failed", err: idem.ErrConditionFailed, status: 409, typ: ProblemAttachedWriteFailed},
		{name: "result not stored", err: idem.ErrResultNotStored, status: 500, typ: ProblemNotReplayable, logged: true},
		{name: "incompatible record", err: idem.ErrIncompatibleRecord, status: 500, typ: ProblemNotReplayable, logged: true},
		{name: "outcome unknown", err: &idem.StoreError{Op: idem.OpCommit, Err: errors.New("timeout")}, status: 503, typ: ProblemOutcomeUnknown, retry: "1"},
		{name: "not committed", err: &idem.StoreError{Op: "complete", Err: idemstore.ErrNotCommitted}, status: 503, typ: ProblemNotCommitted, retry: "1"},
		{name: "store failed", err: storeErr, status: 503, typ: ProblemStoreUnavailable, retry: "1", logged: true},
		{name: "missing key", err: errNoKeyHeader, status: 400, typ: ProblemMissingKey},
		{name: "invalid key", err: idem.ErrInvalidKey, status: 400, typ: ProblemInvalidKey},
		{name: "cancelled", err: context.Canceled, none: true},
		{name: "remembered failure", err: &idem.FailedError{Message: "declined"}, none: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs countingHandler
			r, ok := guardProblem(context.Background(), slog.New(&logs), tc.err, DefaultHeader, false)
			if tc.none {
				assert.False(t, ok)
				assert.Zero(t, logs.n)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tc.status, r.StatusCode)
			assert.Equal(t, tc.retry, r.Headers["Retry-After"])
			var body map[string]any
			require.NoError(t, json.Unmarshal([]byte(r.Body), &body))
			assert.Equal(t, tc.typ, body["type"])
			want := 0
			if tc.logged {
				want = 1
			}
			assert.Equal(t, want, logs.n, "log records")
		})
	}
}

// TestHandlerProblem: of the errors a handler returns, a lost lease and a store failure
// are answered as the guard's own (the ones idem.Checkpoint returns); any other error,
// idem.ErrNoLease included, goes back to Lambda.
func TestHandlerProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want httpResponse // zero: not answered
	}{
		{name: "lease lost", err: fmt.Errorf("charge: %w", idem.ErrLeaseLost), want: leaseLostProblem(false)},
		{name: "store failed", err: &idem.StoreError{Op: "checkpoint", Err: errors.New("throttled")}, want: storeProblem(false)},
		{name: "no lease", err: idem.ErrNoLease},
		{name: "in progress elsewhere", err: &idem.InProgressError{RetryAfter: time.Second}},
		{name: "the handler's own", err: errors.New("card declined")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs countingHandler
			r, ok := handlerProblem(context.Background(), slog.New(&logs), tc.err, false)
			assert.Equal(t, tc.want.StatusCode != 0, ok)
			assert.Equal(t, tc.want, r)
			assert.Equal(t, btoi(ok), logs.n, "logged when answered")
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// countingHandler is a slog.Handler that counts the records it gets.
type countingHandler struct{ n int }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h *countingHandler) Handle(context.Context, slog.Record) error { h.n++; return nil }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h *countingHandler) WithGroup(string) slog.Handler             { return h }
