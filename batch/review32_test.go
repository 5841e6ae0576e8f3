package batch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/memstore"
)

// TestReview32_AttachPanicWithAStoreErrorValueIsAPanic: on the Settle path, settle tells an
// attached write's panic (key released: ReasonPanic) from a panic whose outcome is unknown
// (a *idem.StoreError around it: ReasonStore) with errors.Is(err, idem.ErrStore). But
// AttachPanicError.Unwrap reaches the panic's value: a write that panics with a store's
// error (`if err != nil { panic(err) }` around another guarded call, whose error is an
// *idem.StoreError) is taken for the unknown case. The item fails with ReasonStore, which
// says its key stays in progress until its lease ends, with no *batch.PanicError, though
// the key was released and the redelivery runs at once.
//
// Expected: the poison fails with ReasonPanic and a *batch.PanicError holding the value,
// whatever the value wraps, as on the other paths (a handler's or Do's panic).
func TestReview32_AttachPanicWithAStoreErrorValueIsAPanic(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "panic", idem.WithScope("test"))
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{})
	require.NoError(t, err)
	value := &idem.StoreError{Op: "claim", Err: errors.New("another guard's store is down")}
	items := []batch.Item{{ID: "poison", Group: "a", Key: "key-poison"}, {ID: "fine", Group: "b", Key: "key-fine"}}
	rep := e.Process(deadlineContext(t, g.Clock(), time.Minute), items, func(ctx context.Context, i int) error {
		if i == 1 {
			return idem.Attach(ctx, func() error { return nil })
		}
		return idem.Attach(ctx, func() error { panic(value) })
	}, batch.Mode{})
	assert.Equal(t, []string{"poison:panic", "fine:ran"}, statuses(rep))
	var pe *batch.PanicError
	if assert.ErrorAs(t, rep.Outcomes[0].Err, &pe) {
		assert.Equal(t, value, pe.Value)
	}
}
