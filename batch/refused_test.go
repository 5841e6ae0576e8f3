package batch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// TestEngineIgnoresOnRefusedOnEveryPath: the README says a batch (sqs included) ignores
// idem.OnRefused on every path and releases a key whose attached writes the store refused
// for good. Whatever path the engine takes for the item (a batch claim, the per-item path
// with batch claims off, RecordEach, a lazy claim on a store without batch support), the
// item fails and its key is released, so the redelivery, once funds arrived, runs the
// handler again and debits, rather than replaying the result the handler chose.
func TestEngineIgnoresOnRefusedOnEveryPath(t *testing.T) {
	t.Parallel()
	pay := batch.Item{ID: "pay", Group: "a", Key: "key-pay", Fingerprint: []byte("100")}
	other := batch.Item{ID: "other", Group: "b", Key: "key-other"}
	for _, tc := range []struct {
		name   string
		single bool // hide memstore's batch calls
		opts   []batch.Option
		mode   batch.Mode
		items  []batch.Item
	}{
		{name: "BatchClaim", items: []batch.Item{pay, other}},
		{name: "PerItem", opts: []batch.Option{batch.WithBatchClaims(false)}, items: []batch.Item{pay}},
		{name: "RecordEach", mode: batch.Mode{Ordered: true, RecordEach: true}, items: []batch.Item{pay, other}},
		{name: "LazyBatchClaim", single: true, items: []batch.Item{pay, other}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var store idemstore.Store = memstore.New()
			if tc.single {
				store = singleStore{store}
			}
			g, err := idem.New(store, "refused")
			require.NoError(t, err)
			e, err := batch.New(g, batch.Source{}, tc.opts...)
			require.NoError(t, err)
			var mu sync.Mutex
			balance, runs, asked := 0, 0, 0
			debit := func() error {
				mu.Lock()
				defer mu.Unlock()
				if balance < 100 {
					return errors.New("insufficient funds")
				}
				balance -= 100
				return nil
			}
			process := func() []string {
				rep := e.Process(deadlineContext(t, g.Clock(), time.Minute), tc.items, func(ctx context.Context, i int) error {
					if tc.items[i].ID != pay.ID {
						return nil
					}
					mu.Lock()
					runs++
					mu.Unlock()
					if err := idem.Attach(ctx, debit); err != nil {
						return err
					}
					return idem.OnRefused(ctx, func(context.Context, error) (any, bool) {
						mu.Lock()
						asked++
						mu.Unlock()
						return struct{}{}, true
					})
				}, tc.mode)
				return statuses(rep)
			}
			first := process()
			assert.Equal(t, "pay:handler", first[0], "the refused item fails: %v", first)
			mu.Lock()
			balance = 100 // funds arrive before the redelivery
			mu.Unlock()
			second := process()
			assert.Equal(t, "pay:ran", second[0], "the redelivery runs the item again: %v", second)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, 2, runs, "the key was released, not completed with the chosen result")
			assert.Equal(t, 0, balance, "the redelivery debited")
			assert.Zero(t, asked, "the batch never asks the OnRefused function")
		})
	}
}
