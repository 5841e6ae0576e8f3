package batch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// sizeLimited is a store with attached writes run as code (memstore's func() error, as
// pgstore's Attach closures) and an item size limit it checks before running anything, as
// redisstore and DynamoDB do: a completion that carries a result yields
// idemstore.ErrTooLarge, and the guard writes it again without the result, with its
// attached writes, which then run for the first time.
type sizeLimited struct{ *memstore.Store }

func (s sizeLimited) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if len(rec.Data) > 0 {
		return fmt.Errorf("sizeLimited: complete: %w: %d bytes, limit 0", idemstore.ErrTooLarge, len(rec.Data))
	}
	return s.Store.Complete(ctx, rec, attached)
}

func (s sizeLimited) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	out := make([]error, len(recs))
	for i, r := range recs {
		out[i] = s.Complete(ctx, r, nil)
	}
	return out
}

func (s sizeLimited) CompleteManyAttached(ctx context.Context, recs []*idemstore.Record, attached [][]any) []error {
	out := make([]error, len(recs))
	for i, r := range recs {
		out[i] = s.Complete(ctx, r, attached[i])
	}
	return out
}

// TestReview31_AttachedWritePanicInTheBareResendFailsItsItem: fix28 says an attached write
// that panics fails its item with ReasonPanic "on every path the engine takes", Settle
// recovering it where it completes the batch's outcomes. Settle recovers the batch store
// call and the resend alone, not the completion that idem writes again without its result
// after idemstore.ErrTooLarge (concludeCompletion), which runs the attached writes again.
// There the panic escapes idem's Batch.Settle and the engine's settle: Process panics
// instead of reporting (and the late settle, which the engine runs on a goroutine of its
// own near the deadline, kills the process), and the poison's key stays in progress until
// its lease ends.
//
// Expected: Process returns, the poison fails with ReasonPanic, the item beside it ran. On
// main Process panics.
func TestReview31_AttachedWritePanicInTheBareResendFailsItsItem(t *testing.T) {
	t.Parallel()
	// The engine's result, struct{}{}, encodes as "{}": over the limit.
	g, err := idem.New(sizeLimited{memstore.New()}, "panic", idem.WithScope("test"))
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{})
	require.NoError(t, err)
	items := []batch.Item{{ID: "poison", Group: "a", Key: "key-poison"}, {ID: "fine", Group: "b", Key: "key-fine"}}
	var rep *batch.Report
	var escaped any
	func() {
		defer func() { escaped = recover() }()
		rep = e.Process(deadlineContext(t, g.Clock(), time.Minute), items, func(ctx context.Context, i int) error {
			if items[i].ID == "fine" {
				return idem.Attach(ctx, func() error { return nil })
			}
			return idem.Attach(ctx, func() error { panic("the handler's bug in its write") })
		}, batch.Mode{})
	}()
	require.Nil(t, escaped, "the attached write's panic escaped Process")
	assert.Equal(t, []string{"poison:panic", "fine:ran"}, statuses(rep))
}
