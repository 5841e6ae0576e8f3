package redisstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/redisstore"
)

// TestOutboxRecordRefused: Redis has no transaction that could commit an outbox event
// with the record, so outbox.Record refuses at the call, in the handler, with
// ErrAttachUnsupported.
func TestOutboxRecordRefused(t *testing.T) {
	t.Parallel()
	g, err := idem.New(newStore(t, env.Client(t)), "pay")
	require.NoError(t, err)
	var recordErr error
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
		_, recordErr = outbox.Record(ctx, outbox.Event{Destination: "q", Type: "Paid"})
		return 0, recordErr
	})
	require.ErrorIs(t, recordErr, redisstore.ErrAttachUnsupported)
	require.ErrorIs(t, recordErr, idemstore.ErrInvalidAttach)
	require.ErrorIs(t, err, redisstore.ErrAttachUnsupported)
}
