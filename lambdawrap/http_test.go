package lambdawrap_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// checkpointFailStore is a working store whose checkpoints fail with err.
type checkpointFailStore struct {
	idemstore.Store
	err error
}

func (s checkpointFailStore) SetCheckpoint(context.Context, string, string, string) error {
	return s.err
}

// TestHandlerReturnsGuardError: a handler whose idem.Checkpoint fails returns that error,
// and the wrapper answers it as it answers the same error met anywhere else: a lost lease
// as when the completion finds it lost (409, Retry-After), a store failure as when the
// claim fails (503, Retry-After). Nothing is stored, so a retry runs the handler again.
func TestHandlerReturnsGuardError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		// elsewhere builds a guard that meets the same error outside the handler, in a
		// scope of its own.
		elsewhere func(t *testing.T, store idemstore.Store) *idem.Guard
		status    int
	}{
		{name: "lease lost", err: idemstore.ErrLeaseLost, status: 409,
			elsewhere: func(t *testing.T, store idemstore.Store) *idem.Guard {
				return newGuard(t, newCompleteFailStore(store, idemstore.ErrLeaseLost, 1), idem.WithScope(t.Name()+"/elsewhere"))
			}},
		{name: "store failure", err: errUnavailable, status: 503,
			elsewhere: func(t *testing.T, _ idemstore.Store) *idem.Guard {
				return newGuard(t, failingStore{})
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
				ctx := invokeCtx(t)
				want := invoke(ctx, t, (&app{}).handler(t, ev.kind, tc.elsewhere(t, store)), ev)
				require.NoError(t, want.err)
				require.Equal(t, tc.status, want.code, "elsewhere: %s", want.raw)

				a := &app{checkpoint: true}
				h := a.handler(t, ev.kind, newGuard(t, checkpointFailStore{Store: store, err: tc.err}))
				for i := range 2 {
					got := invoke(ctx, t, h, ev)
					require.NoError(t, got.err, "answered, not an invocation error")
					assert.Equal(t, want.m, got.m, "request %d", i+1)
				}
				assert.Equal(t, int64(2), a.runs.Load(), "nothing stored: the retry ran again")
			})
		})
	}
}
