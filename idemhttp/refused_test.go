package idemhttp_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemstore"
)

// errFunds is an attached write's own refusal: a balance too low.
var errFunds = errors.New("insufficient funds")

// TestWithRefused: a handler answers 201, but the store refuses its attached write. With
// WithRefused the author's problem is the answer, stored and replayed as a 4xx is, so a
// retry does not run the handler again; a status WithCacheable does not store is answered
// and the key released; without WithRefused, or when it declines, or for a refusal that
// may not recur (refused is not asked), the answers are those of before.
func TestWithRefused(t *testing.T) {
	t.Parallel()
	declined := idemhttp.Problem{Status: http.StatusPaymentRequired, Type: "https://example.com/problems/insufficient-funds", Detail: "the account's balance is too low"}
	cases := []struct {
		name      string
		write     func() error
		refused   func(context.Context, error) (idemhttp.Problem, bool) // nil: no WithRefused
		status    int                                                   // every answer's
		problem   string                                                // the problem type
		runs      int64                                                 // after two requests
		asked     int64
		retryable bool
	}{
		{name: "Mapped", write: func() error { return errFunds },
			refused: func(_ context.Context, err error) (idemhttp.Problem, bool) { return declined, errors.Is(err, errFunds) },
			status:  http.StatusPaymentRequired, problem: declined.Type, runs: 1, asked: 1},
		{name: "MappedNotCacheable", write: func() error { return errFunds },
			refused: func(context.Context, error) (idemhttp.Problem, bool) {
				return idemhttp.Problem{Status: http.StatusConflict}, true
			},
			status: http.StatusConflict, problem: "about:blank", runs: 2, asked: 2},
		{name: "Declined", write: func() error { return errFunds },
			refused: func(context.Context, error) (idemhttp.Problem, bool) { return idemhttp.Problem{}, false },
			status:  http.StatusConflict, problem: idemhttp.ProblemAttachedWriteFailed, runs: 2, asked: 2},
		{name: "NoStatus", write: func() error { return errFunds },
			refused: func(context.Context, error) (idemhttp.Problem, bool) { return idemhttp.Problem{}, true },
			status:  http.StatusConflict, problem: idemhttp.ProblemAttachedWriteFailed, runs: 2, asked: 2},
		{name: "Default", write: func() error { return errFunds },
			status: http.StatusConflict, problem: idemhttp.ProblemAttachedWriteFailed, runs: 2},
		{name: "Retryable", write: func() error { return errors.Join(idemstore.ErrNotCommitted, errFunds) },
			refused: func(context.Context, error) (idemhttp.Problem, bool) { return declined, true },
			status:  http.StatusServiceUnavailable, problem: idemhttp.ProblemNotCommitted, runs: 2, retryable: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var runs, asked atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				if err := idem.Attach(r.Context(), tc.write); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusCreated)
			})
			var opts []idemhttp.Option
			if tc.refused != nil {
				opts = append(opts, idemhttp.WithRefused(func(ctx context.Context, err error) (idemhttp.Problem, bool) {
					asked.Add(1)
					assert.True(t, idem.IsRefused(err))
					return tc.refused(ctx, err)
				}))
			}
			srv := serve(t, memGuard(t), h, opts...)
			for i := range 2 {
				r := send(t, http.MethodPost, srv.URL, "pay-1", `{"amount":100}`)
				checkProblem(t, r, tc.status, tc.problem)
				assert.Equal(t, tc.runs == 1 && i == 1, r.header.Get("Idempotent-Replayed") == "true", "request %d", i)
				if tc.status == declined.Status {
					assert.JSONEq(t, `{"type":"`+declined.Type+`","title":"Payment Required","status":402,"detail":"the account's balance is too low"}`, r.body)
				}
			}
			assert.Equal(t, tc.runs, runs.Load(), "runs")
			assert.Equal(t, tc.asked, asked.Load(), "asked")
		})
	}
}

func TestWithRefusedNil(t *testing.T) {
	t.Parallel()
	_, err := idemhttp.Middleware(memGuard(t), idemhttp.WithRefused(nil))
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithRefused")
}
