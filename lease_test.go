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

// TestAttachRefusesWhatTheStoreCannotCommit: a value the guard's store cannot commit (the
// in-memory store takes func() error) is refused by Attach itself, at once, with an error
// naming its type; it is not attached, so a handler that goes on completes without it, and
// one that returns the error releases the key: the next request runs at once instead of
// finding the key in progress until the lease ends.
func TestAttachRefusesWhatTheStoreCannotCommit(t *testing.T) {
	t.Parallel()
	type orderRow struct{ ID string }
	for _, tc := range []struct {
		name          string
		returnAttach  bool // the handler returns Attach's error
		wantCompleted bool
	}{
		{"HandlerReturnsTheError", true, false},
		{"HandlerGoesOn", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(memstore.New(), "test")
			require.NoError(t, err)
			var attachErr error
			var runs atomic.Int32
			_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
				runs.Add(1)
				attachErr = idem.Attach(ctx, func() error { return nil }, orderRow{ID: "o-1"})
				if tc.returnAttach {
					return 0, attachErr
				}
				return 1, nil
			})
			require.ErrorIs(t, attachErr, idemstore.ErrInvalidAttach, "refused by Attach, not at completion")
			assert.ErrorContains(t, attachErr, "idem_test.orderRow", "the error names the type")
			if tc.returnAttach {
				require.ErrorIs(t, err, idemstore.ErrInvalidAttach)
			} else {
				require.NoError(t, err, "nothing refused was attached: the completion commits")
			}

			v, replayed, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) {
				runs.Add(1)
				return 2, nil
			})
			require.NoError(t, err, "the key is not left in progress")
			assert.Equal(t, tc.wantCompleted, replayed)
			assert.Equal(t, map[bool]int{true: 1, false: 2}[tc.wantCompleted], v)
			assert.Equal(t, map[bool]int32{true: 1, false: 2}[tc.wantCompleted], runs.Load())
		})
	}
}
