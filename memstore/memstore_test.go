package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

func TestBehaviour(t *testing.T) {
	for _, batch := range []bool{false, true} {
		name := "Do"
		if batch {
			name = "Batch"
		}
		t.Run(name, func(t *testing.T) { storetest.Run(t, memHarness(batch)) })
	}
}

func memHarness(batch bool) storetest.Harness {
	return storetest.Harness{
		Batch:    batch,
		NewStore: func(*testing.T) idemstore.Store { return memstore.New() },
		NewCounter: func(t *testing.T, _ idemstore.Store) (func(context.Context, int, bool) error, func() int) {
			var total atomic.Int64
			add := func(ctx context.Context, n int, failCond bool) error {
				return idem.Attach(ctx, func() error {
					if failCond {
						return errors.New("balance condition failed")
					}
					total.Add(int64(n))
					return nil
				})
			}
			return add, func() int { return int(total.Load()) }
		},
	}
}

func TestZeroValue(t *testing.T) {
	var s memstore.Store
	ctx := context.Background()
	rec, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Nil(t, rec, "an empty store has no record")
	assert.Zero(t, s.Len())
	g, err := idem.New(&s, "test")
	require.NoError(t, err)
	runs := 0
	for range 2 {
		v, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(context.Context) (int, error) {
			runs++
			return 7, nil
		})
		require.NoError(t, err)
		assert.Equal(t, 7, v)
	}
	assert.Equal(t, 1, runs, "the zero value guards like New's store")
	assert.Equal(t, 1, s.Len())
}

// TestCheckAttached: the store takes func() error values only, so idem.Attach refuses any
// other at once (and a nil func, which would panic at completion); Complete, which a
// wrapper without CheckAttached reaches directly, refuses them too.
func TestCheckAttached(t *testing.T) {
	t.Parallel()
	var nilFunc func() error
	for _, tc := range []struct {
		name     string
		attached []any
		ok       bool
	}{
		{"None", nil, true},
		{"Funcs", []any{func() error { return nil }, func() error { return nil }}, true},
		{"AnotherType", []any{func() error { return nil }, "put row"}, false},
		{"NilFunc", []any{nilFunc}, false},
		{"Nil", []any{nil}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := memstore.New()
			err := s.CheckAttached(tc.attached)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			rec := &idemstore.Record{Key: "k", Status: idemstore.StatusInProgress, LeaseToken: "t", Version: idemstore.SchemaVersion}
			_, claimed, err := s.Claim(context.Background(), rec, time.Now())
			require.NoError(t, err)
			require.True(t, claimed)
			done := *rec
			done.Status = idemstore.StatusCompleted
			require.Error(t, s.Complete(context.Background(), &done, tc.attached))
			cur, err := s.Get(context.Background(), "k")
			require.NoError(t, err)
			assert.Equal(t, idemstore.StatusInProgress, cur.Status, "nothing committed")
		})
	}
}

// TestAttachedWriteErrors: an attached write's error fails the completion with
// ErrConditionFailed, unless it already says why (ErrConditionFailed, or ErrNotCommitted
// for a write refused as a whole), which is returned as it is; nothing commits.
func TestAttachedWriteErrors(t *testing.T) {
	t.Parallel()
	errRefused := fmt.Errorf("%w: refused as a whole", idemstore.ErrNotCommitted)
	for _, tc := range []struct {
		name    string
		err     error
		is, not error
	}{
		{"PlainError", errors.New("balance too low"), idemstore.ErrConditionFailed, idemstore.ErrNotCommitted},
		{"ConditionFailed", fmt.Errorf("row exists: %w", idemstore.ErrConditionFailed), idemstore.ErrConditionFailed, idemstore.ErrNotCommitted},
		{"NotCommitted", errRefused, idemstore.ErrNotCommitted, idemstore.ErrConditionFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := memstore.New()
			rec := &idemstore.Record{Key: "k", Status: idemstore.StatusInProgress, LeaseToken: "t", Version: idemstore.SchemaVersion}
			_, claimed, err := s.Claim(context.Background(), rec, time.Now())
			require.NoError(t, err)
			require.True(t, claimed)
			done := *rec
			done.Status = idemstore.StatusCompleted
			err = s.Complete(context.Background(), &done, []any{func() error { return tc.err }})
			require.ErrorIs(t, err, tc.is)
			require.ErrorIs(t, err, tc.err)
			assert.NotErrorIs(t, err, tc.not)
			cur, err := s.Get(context.Background(), "k")
			require.NoError(t, err)
			assert.Equal(t, idemstore.StatusInProgress, cur.Status, "nothing committed")
		})
	}
}
