package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// tooLargeInBatch is a batch store whose batched completion refuses every record as too
// large (as DynamoDB refuses an item over 400 KB that WithMaxResultSize let through), and
// whose single completion, the guard's resend without the body, signals entered and then
// waits for gate.
type tooLargeInBatch struct {
	*memstore.Store
	entered, gate chan struct{}
}

func (s *tooLargeInBatch) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	out := make([]error, len(recs))
	for i := range out {
		out[i] = idemstore.ErrTooLarge
	}
	return out
}

func (s *tooLargeInBatch) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	close(s.entered)
	<-s.gate
	return s.Store.Complete(ctx, rec, attached)
}

// TestSettleTooLargeDoesNotRewriteRecordDuplicatesReplay: a batch duplicate replays the
// record its key's run left waiting for Settle. Settle, which may run while DoClaimed calls
// still run (early, near the deadline), completes that outcome again without its body when
// the store refuses it as too large; it must not clear the body in the record duplicates
// read (run with -race: a data race). A duplicate that replays while that completion is
// under way gets the run's result; one after it gets what the store recorded: the work
// done, its result not stored.
func TestSettleTooLargeDoesNotRewriteRecordDuplicatesReplay(t *testing.T) {
	s := &tooLargeInBatch{Store: memstore.New(), entered: make(chan struct{}), gate: make(chan struct{})}
	clock := storetest.NewSettableClock()
	g, err := idem.New(s, "op", idem.WithClock(clock), idem.WithScope("s"))
	require.NoError(t, err)
	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(time.Minute))
	defer cancel()
	req := idem.Request{Key: "k1", Fingerprint: []byte("A")}
	b := g.Claim(ctx, []idem.Request{req, req, req, {Key: "k2"}})
	v, _, err := idem.DoClaimed(ctx, b, 0, func(context.Context) (string, error) { return "result", nil })
	require.NoError(t, err)
	require.Equal(t, "result", v)

	settled := make(chan []error)
	go func() { settled <- b.Settle(ctx) }() // early, while requests 1 and 2 are still to answer
	<-s.entered                              // Settle resends the completion without the body
	ran := func(context.Context) (string, error) { return "ran again", nil }
	v, replayed, err := idem.DoClaimed(ctx, b, 1, ran)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, "result", v, "the run's result, while its completion is under way")
	close(s.gate)
	require.Equal(t, []error{nil, nil, nil, nil}, <-settled)

	_, _, err = idem.DoClaimed(ctx, b, 2, ran)
	require.ErrorIs(t, err, idem.ErrResultNotStored, "recorded without its body: as a retry of the key")
	_, _, err = idem.Do(ctx, g, req, ran)
	require.ErrorIs(t, err, idem.ErrResultNotStored)
}
