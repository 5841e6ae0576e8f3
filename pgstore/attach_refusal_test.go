package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// lockedBuffer is a log destination safe for the guard's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestAttachedWriteRefusal: a write the server refuses for good (a CHECK constraint,
// SQLSTATE class 23) or that refuses itself (a business rule it checks) is a permanent
// refusal; one cancelled by its context is not. Either way errors.As reaches the
// *pgstore.AttachedWriteError and the driver's *pgconn.PgError from Do's error and from
// OnReleased's event, and the guard logs it once at WARN with the SQLSTATE and the stored
// key, never the raw key or a value.
func TestAttachedWriteRefusal(t *testing.T) {
	t.Parallel()
	errLimit := errors.New("over the daily limit")
	cases := []struct {
		name      string
		write     func(table string) pgstore.Write
		permanent bool
		sqlstate  string // the driver's error's, or "" for none
		reason    string // what the log line's reason holds
	}{
		{
			name: "CheckConstraint", permanent: true, sqlstate: "23514", reason: "SQLSTATE 23514",
			write: func(table string) pgstore.Write {
				return func(ctx context.Context, tx pgx.Tx) error {
					_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s VALUES ($1, $2)`, table), "secret-value-1", "XTS")
					return err
				}
			},
		},
		{
			name: "OwnRule", permanent: true, reason: "returned its own error",
			write: func(string) pgstore.Write {
				return func(context.Context, pgx.Tx) error { return fmt.Errorf("secret-value-1: %w", errLimit) }
			},
		},
		{
			name: "ContextEnded", reason: "context",
			write: func(string) pgstore.Write {
				return func(context.Context, pgx.Tx) error { return context.DeadlineExceeded }
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var logs lockedBuffer
			var mu sync.Mutex
			var released []idem.Event
			g, _, l, _ := newGuard(t, nil,
				idem.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
				idem.WithHooks(idem.Hooks{OnReleased: func(_ context.Context, e idem.Event) {
					mu.Lock()
					released = append(released, e)
					mu.Unlock()
				}}))
			table := pgtest.Name("payments")
			_, err := l.pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (id text PRIMARY KEY,
				currency text NOT NULL CONSTRAINT currency_supported CHECK (currency IN ('EUR', 'USD')))`, table))
			require.NoError(t, err)

			req := idem.Request{Key: "raw-key-secret"}
			_, _, err = idem.Do(ctx, g, req, func(ctx context.Context) (out, error) {
				return out{N: 201}, pgstore.Attach(ctx, tc.write(table))
			})
			require.ErrorIs(t, err, idem.ErrConditionFailed)
			assert.Equal(t, tc.permanent, idem.IsRefused(err))

			mu.Lock()
			require.Len(t, released, 1, "the key is released")
			events := []error{err, released[0].Err}
			mu.Unlock()
			for i, e := range events {
				var awe *pgstore.AttachedWriteError
				require.ErrorAs(t, e, &awe, "error %d", i)
				assert.Equal(t, 0, awe.Index)
				assert.Equal(t, tc.permanent, awe.Permanent())
				assert.Contains(t, awe.Reason(), tc.reason)
				assert.NotContains(t, awe.Reason(), "secret-value-1")
				var pe *pgconn.PgError
				if tc.sqlstate != "" {
					require.ErrorAs(t, e, &pe, "error %d", i)
					assert.Equal(t, tc.sqlstate, pe.Code)
					assert.Equal(t, "currency_supported", pe.ConstraintName)
				} else {
					assert.False(t, errors.As(e, &pe))
				}
			}

			stored, err := g.StoredKey(req)
			require.NoError(t, err)
			var warns []string
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "level=WARN") {
					warns = append(warns, line)
				}
			}
			require.Len(t, warns, 1, logs.String())
			assert.Contains(t, warns[0], stored)
			assert.Contains(t, warns[0], tc.reason)
			assert.NotContains(t, logs.String(), "raw-key-secret")
			assert.NotContains(t, logs.String(), "secret-value-1")
		})
	}
}
