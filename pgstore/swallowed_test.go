package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// TestSwallowedDeadlockIsNotPermanent: an attached write reads a balance and
// returns its own business error when the read fails or the balance is short, the common
// `if err != nil || bal < n { return errFunds }`. The read fails with a deadlock (SQLSTATE
// 40P01, raised here by a function on its first call, as the server raises it for a
// transaction it cancels), which the write swallows. The transaction is then failed
// (TxStatus 'E'): a statement failed, and the write's own error says nothing of which.
// The store used to report a permanent refusal (IsRefused, so WithRefused/OnRefused would
// store the author's 402 for good); a failed transaction without a server error from the
// write is not committed and retryable. Sent again with the same data, the write succeeds.
func TestSwallowedDeadlockIsNotPermanent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, _, l, _ := newGuard(t, nil)
	seq, fn := pgtest.Name("r8seq"), pgtest.Name("r8balance")
	_, err := l.pool.Exec(ctx, fmt.Sprintf(`CREATE SEQUENCE %[1]s;
CREATE FUNCTION %[2]s() RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
	IF nextval('%[1]s') = 1 THEN
		RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01';
	END IF;
	RETURN 100;
END $$`, seq, fn))
	require.NoError(t, err)
	errFunds := errors.New("insufficient funds")
	write := func(ctx context.Context, tx pgx.Tx) error {
		var bal int
		if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT %s()`, fn)).Scan(&bal); err != nil || bal < 100 {
			return errFunds
		}
		return nil
	}
	pay := func() error {
		_, _, err := idem.Do(ctx, g, idem.Request{Key: "pay-1"}, func(ctx context.Context) (out, error) {
			return out{N: 201}, pgstore.Attach(ctx, write)
		})
		return err
	}
	err = pay()
	require.Error(t, err)
	assert.False(t, idem.IsRefused(err), "a deadlock the write swallowed is reported as refused for good: %v", err)
	require.NoError(t, pay(), "sent again with the same data, it succeeds")
}
