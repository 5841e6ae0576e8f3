package batch_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// TestAttachedWritePanicFailsItsItemOnEveryPath: an attached write that panics (a
// handler's bug) fails its item as a panicking handler does (ReasonPanic, a
// *batch.PanicError), whatever path the engine takes: with a deadline the lease outlasts
// its outcome waits for idem's Batch.Settle, which completes attached writes on a goroutine
// of its own (before, the panic crashed the process there); without one, or per item, or
// recorded at once, the guard completes it on the handler's goroutine and the panic goes on
// to the engine's recover. The item beside it runs, and the poison's key is released, so
// its redelivery runs again.
func TestAttachedWritePanicFailsItsItemOnEveryPath(t *testing.T) {
	t.Parallel()
	poison := batch.Item{ID: "poison", Group: "a", Key: "key-poison"}
	fine := batch.Item{ID: "fine", Group: "b", Key: "key-fine"}
	for _, tc := range []struct {
		name     string
		single   bool          // hide memstore's batch calls
		deadline time.Duration // 0: none
		opts     []batch.Option
		mode     batch.Mode
	}{
		{name: "SettleWithADeadline", deadline: time.Minute},
		{name: "BatchClaimWithoutADeadline"},
		{name: "PerItem", deadline: time.Minute, opts: []batch.Option{batch.WithBatchClaims(false)}},
		{name: "RecordEach", deadline: time.Minute, mode: batch.Mode{Ordered: true, RecordEach: true}},
		{name: "LazyBatchClaim", deadline: time.Minute, single: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var store idemstore.Store = memstore.New()
			if tc.single {
				store = singleStore{store}
			}
			g, err := idem.New(store, "panic", idem.WithScope("test"))
			require.NoError(t, err)
			e, err := batch.New(g, batch.Source{}, tc.opts...)
			require.NoError(t, err)
			var poisoned atomic.Bool
			poisoned.Store(true)
			var fineWrites atomic.Int32
			items := []batch.Item{poison, fine}
			process := func() *batch.Report {
				ctx := context.Background()
				if tc.deadline > 0 {
					ctx = deadlineContext(t, g.Clock(), tc.deadline)
				}
				return e.Process(ctx, items, func(ctx context.Context, i int) error {
					if items[i].ID == fine.ID {
						return idem.Attach(ctx, func() error { fineWrites.Add(1); return nil })
					}
					return idem.Attach(ctx, func() error {
						if poisoned.Load() {
							panic("the handler's bug in its write")
						}
						return nil
					})
				}, tc.mode)
			}
			rep := process()
			assert.Equal(t, []string{"poison:panic", "fine:ran"}, statuses(rep))
			var pe *batch.PanicError
			require.ErrorAs(t, rep.Outcomes[0].Err, &pe)
			assert.Equal(t, "the handler's bug in its write", pe.Value)
			assert.EqualValues(t, 1, fineWrites.Load(), "the other item's write ran once")

			poisoned.Store(false) // the fix deployed: the redelivery runs again
			assert.Equal(t, []string{"poison:ran", "fine:replayed"}, statuses(process()))
		})
	}
}
