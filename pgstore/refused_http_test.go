package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// TestPaymentsAPIUnsupportedCurrency is the new user's payments API on PostgreSQL: the
// handler attaches the payment's INSERT and answers 201, and the table's CHECK constraint
// refuses an unsupported currency when the completion commits. With the one mapping
// WithRefused, the client gets 422 problem+json and its retry gets the same answer
// replayed, the handler not run again, no row inserted. Without it, as before: 409
// ProblemAttachedWriteFailed, nothing stored, and the retry runs the handler again.
func TestPaymentsAPIUnsupportedCurrency(t *testing.T) {
	t.Parallel()
	for _, mapped := range []bool{true, false} {
		t.Run(map[bool]string{true: "Mapped", false: "Default"}[mapped], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			g, _, l, _ := newGuard(t, nil)
			table := pgtest.Name("payments")
			_, err := l.pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (id text PRIMARY KEY, amount bigint NOT NULL,
				currency text NOT NULL CONSTRAINT currency_supported CHECK (currency IN ('EUR', 'USD')))`, table))
			require.NoError(t, err)
			var opts []idemhttp.Option
			if mapped {
				opts = append(opts, idemhttp.WithRefused(func(_ context.Context, err error) (idemhttp.Problem, bool) {
					var pe *pgconn.PgError
					if errors.As(err, &pe) && pe.ConstraintName == "currency_supported" {
						return idemhttp.Problem{Status: http.StatusUnprocessableEntity, Type: "https://example.com/problems/unsupported-currency"}, true
					}
					return idemhttp.Problem{}, false
				}))
			}
			mw, err := idemhttp.Middleware(g, opts...)
			require.NoError(t, err)
			var runs atomic.Int64
			srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				b, _ := io.ReadAll(r.Body)
				currency := strings.Trim(string(b), `"`)
				err := pgstore.Attach(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
					_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s VALUES ($1, 1250, $2)`, table), idem.StoredKey(ctx), currency)
					return err
				})
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusCreated)
			})))
			t.Cleanup(srv.Close)
			post := func() (int, string, http.Header) {
				req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`"XTS"`))
				require.NoError(t, err)
				req.Header.Set("Idempotency-Key", "pay-1")
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp.StatusCode, string(b), resp.Header
			}
			for i := range 2 {
				status, body, h := post()
				assert.Equal(t, "application/problem+json", h.Get("Content-Type"))
				if mapped {
					assert.Equal(t, http.StatusUnprocessableEntity, status)
					assert.JSONEq(t, `{"type":"https://example.com/problems/unsupported-currency","title":"Unprocessable Entity","status":422}`, body)
					assert.Equal(t, i == 1, h.Get("Idempotent-Replayed") == "true", "request %d", i)
				} else {
					assert.Equal(t, http.StatusConflict, status)
					assert.Contains(t, body, idemhttp.ProblemAttachedWriteFailed)
				}
			}
			want := map[bool]int64{true: 1, false: 2}[mapped]
			assert.Equal(t, want, runs.Load(), "runs")
			var rows int
			require.NoError(t, l.pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s`, table)).Scan(&rows))
			assert.Zero(t, rows)
		})
	}
}
