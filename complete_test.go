package idem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// blindStore fails every completion and every read.
type blindStore struct{ *memstore.Store }

var errBlind = errors.New("store unreachable")

func (blindStore) Complete(context.Context, *idemstore.Record, []any) error { return errBlind }
func (blindStore) Get(context.Context, string) (*idemstore.Record, error)   { return nil, errBlind }

// A completion that fails, and whose record cannot be read back, reports what is known:
// without attached writes the handler's effects stand ("complete"); with them, whether they
// committed is unknown (OpCommit), never "nothing committed" nor a plain success.
func TestCompletionOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		attach bool
		op     string
	}{
		{"no attached writes", false, "complete"},
		{"attached writes", true, idem.OpCommit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(blindStore{memstore.New()}, "test")
			require.NoError(t, err)
			v, _, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
				if tc.attach {
					require.NoError(t, idem.Attach(ctx, func() error { return nil }))
				}
				return 7, nil
			})
			var se *idem.StoreError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tc.op, se.Op)
			assert.ErrorIs(t, err, errBlind)
			assert.NotErrorIs(t, err, idemstore.ErrNotCommitted)
			assert.Equal(t, 7, v, "the handler's result comes back with the error")
		})
	}
}
