package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/pgstore"
)

// outboxRow is an outbox row as a test reads it.
type outboxRow struct {
	ID, OrderingKey, Type, StoredKey string
	Headers                          map[string]string
	Payload                          []byte
}

func outboxRows(t *testing.T, db pgstore.DB, table string) []outboxRow {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT id, ordering_key, type, coalesce(stored_key, ''), headers, payload FROM `+pgx.Identifier{table}.Sanitize()+` ORDER BY seq`)
	require.NoError(t, err)
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		require.NoError(t, rows.Scan(&r.ID, &r.OrderingKey, &r.Type, &r.StoredKey, &r.Headers, &r.Payload))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestOutboxRowsCommitInTheCompletionTransaction: outbox.Record inserts a row in the
// completion's transaction: none for a failed run or a run whose attached write failed,
// one per event for a completed run, nothing more on a replay; a fenced-off run's event
// never commits.
func TestOutboxRowsCommitInTheCompletionTransaction(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t, nil)
	ctx := context.Background()
	require.NoError(t, pgstore.CreateOutboxTable(ctx, pool, s.OutboxTable()))
	clock := storetest.NewSettableClock()
	g, err := idem.New(s, "pay", idem.WithClock(clock), idem.WithLease(time.Minute))
	require.NoError(t, err)

	declined := errors.New("declined")
	record := func(ctx context.Context, typ string) error {
		_, err := outbox.Record(ctx, outbox.Event{Destination: "q", OrderingKey: "acct-1", Type: typ,
			Payload: []byte(`{"cents":1}`), Headers: map[string]string{"tenant": "t1"}})
		return err
	}
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "failed"}, func(ctx context.Context) (string, error) {
		require.NoError(t, record(ctx, "Failed"))
		return "", declined
	})
	require.ErrorIs(t, err, declined)
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "write-failed"}, func(ctx context.Context) (string, error) {
		require.NoError(t, record(ctx, "WriteFailed"))
		return "", pgstore.Attach(ctx, func(context.Context, pgx.Tx) error { return declined })
	})
	require.ErrorIs(t, err, idem.ErrConditionFailed)

	pay := func(ctx context.Context) (string, error) {
		if err := record(ctx, "Taken"); err != nil {
			return "", err
		}
		return "ok", record(ctx, "ReceiptDue")
	}
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "p-1"}, pay)
	require.NoError(t, err)
	_, replayed, err := idem.Do(ctx, g, idem.Request{Key: "p-1"}, pay)
	require.NoError(t, err)
	require.True(t, replayed)

	// A run whose lease ends while it works is taken over; only the new owner's event
	// commits.
	recorded, resume, firstDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, _, err := idem.Do(ctx, g, idem.Request{Key: "p-2"}, func(ctx context.Context) (string, error) {
			err := record(ctx, "FencedOff")
			close(recorded)
			<-resume
			return "first", err
		})
		firstDone <- err
	}()
	<-recorded
	clock.Advance(2 * time.Minute) // the first owner's lease ends: it looks crashed
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "p-2"}, func(ctx context.Context) (string, error) {
		return "second", record(ctx, "NewOwner")
	})
	require.NoError(t, err)
	close(resume)
	require.ErrorIs(t, <-firstDone, idem.ErrLeaseLost)

	sk, err := g.StoredKey(idem.Request{Key: "p-1"})
	require.NoError(t, err)
	got := outboxRows(t, pool, s.OutboxTable())
	types := make([]string, len(got))
	for i, r := range got {
		types[i] = r.Type
	}
	assert.Equal(t, []string{"Taken", "ReceiptDue", "NewOwner"}, types)
	require.Len(t, got, 3)
	assert.Equal(t, sk, got[0].StoredKey)
	assert.Equal(t, map[string]string{"tenant": "t1"}, got[0].Headers)
	assert.Equal(t, []byte(`{"cents":1}`), got[0].Payload)
}

// TestOutboxRowsCommitInABatchCompletion: events recorded by a batch's handlers commit
// with the batch's completion, one row per event.
func TestOutboxRowsCommitInABatchCompletion(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t, nil)
	ctx := context.Background()
	require.NoError(t, pgstore.CreateOutboxTable(ctx, pool, s.OutboxTable()))
	g, err := idem.New(s, "pay", idem.WithLease(time.Minute))
	require.NoError(t, err)

	reqs := []idem.Request{{Key: "b-1"}, {Key: "b-2"}, {Key: "b-3"}}
	b := g.Claim(ctx, reqs)
	for i, r := range reqs {
		_, _, err := idem.DoClaimed(ctx, b, i, func(ctx context.Context) (string, error) {
			_, err := outbox.Record(ctx, outbox.Event{Destination: "q", OrderingKey: r.Key, Type: "Taken"})
			return "ok", err
		})
		require.NoError(t, err)
	}
	for _, err := range b.Settle(ctx) {
		require.NoError(t, err)
	}
	rows := outboxRows(t, pool, s.OutboxTable())
	require.Len(t, rows, 3)
	keys := []string{rows[0].OrderingKey, rows[1].OrderingKey, rows[2].OrderingKey}
	assert.ElementsMatch(t, []string{"b-1", "b-2", "b-3"}, keys)
}
