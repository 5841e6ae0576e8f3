package idem_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// committedThenPanicsOnce is a store whose single completion with attached writes commits
// and then panics, and counts its completions.
type committedThenPanicsOnce struct {
	*memstore.Store
	calls *atomic.Int32
}

func (s committedThenPanicsOnce) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	s.calls.Add(1)
	if err := s.Store.Complete(ctx, rec, attached); err != nil || len(attached) == 0 {
		return err
	}
	panic("the store's bug, after its commit")
}

// TestDoKeepsACompletionThatCommittedBeforeThePanic: a completion whose store call panics
// is read back, never sent again (its writes may have run); one found completed under its
// token stays completed (no release, OnCompleted fires), and the panic goes on.
func TestDoKeepsACompletionThatCommittedBeforeThePanic(t *testing.T) {
	t.Parallel()
	var calls, completed, released, writes atomic.Int32
	g, err := idem.New(committedThenPanicsOnce{memstore.New(), &calls}, "test", idem.WithScope("test"),
		idem.WithHooks(idem.Hooks{
			OnCompleted: func(context.Context, idem.Event) { completed.Add(1) },
			OnReleased:  func(context.Context, idem.Event) { released.Add(1) },
		}))
	require.NoError(t, err)
	req := idem.Request{Key: "k"}
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_, _, _ = idem.Do(context.Background(), g, req, func(ctx context.Context) (int, error) {
			return 1, idem.Attach(ctx, func() error { writes.Add(1); return nil })
		})
	}()
	assert.Equal(t, "the store's bug, after its commit", recovered, "the panic goes on")
	assert.EqualValues(t, 1, calls.Load(), "the completion was sent again after the panic")
	assert.EqualValues(t, 1, completed.Load())
	assert.Zero(t, released.Load(), "the key of a committed completion was released")

	v, replayed, err := idem.Do(context.Background(), g, req, func(context.Context) (int, error) {
		t.Error("the handler ran again")
		return 2, nil
	})
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, 1, v)
	assert.EqualValues(t, 1, writes.Load())
}
