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

// TestReview11_SwallowedDeadlockInSavepointIsPermanent: refusedfix (TestSwallowedDeadlockIsNotPermanent)
// made a deadlock an attached write swallows retryable by reading the connection's
// transaction status: failed ('E') with no server error from the write. A write whose read
// runs in a savepoint (pgx.BeginFunc on the completion's pgx.Tx, as a shared helper that
// takes a pgx.Tx does) has the deadlock rolled back to the savepoint: the transaction is
// healthy ('T'), and the write returns its own "insufficient funds". The store calls it a
// permanent refusal (IsRefused), so OnRefused's chosen answer (the author's 402) is stored
// for good for what was a deadlock: the retry with the same data, which would succeed, is
// answered 402 and the handler never runs again.
func TestReview11_SwallowedDeadlockInSavepointIsPermanent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, _, l, _ := newGuard(t, nil)
	seq, fn := pgtest.Name("r11sseq"), pgtest.Name("r11sbalance")
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
		return pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error { // a savepoint
			var bal int
			if err := sp.QueryRow(ctx, fmt.Sprintf(`SELECT %s()`, fn)).Scan(&bal); err != nil || bal < 100 {
				return errFunds
			}
			return nil
		})
	}
	runs := 0
	pay := func() (out, error) {
		v, _, err := idem.Do(ctx, g, idem.Request{Key: "pay-r11"}, func(ctx context.Context) (out, error) {
			runs++
			if err := idem.OnRefused(ctx, func(context.Context, error) (any, bool) { return out{N: 402}, true }); err != nil {
				return out{}, err
			}
			return out{N: 201}, pgstore.Attach(ctx, write)
		})
		return v, err
	}
	v, err := pay()
	assert.False(t, idem.IsRefused(err), "a deadlock the write swallowed is reported as refused for good: %v", err)
	assert.NotEqual(t, 402, v.N, "the author's 402 answered for a deadlock")
	v, err = pay()
	require.NoError(t, err)
	assert.Equal(t, 201, v.N, "sent again with the same data, the write succeeds; got the stored 402 instead")
	assert.Equal(t, 2, runs)
}
