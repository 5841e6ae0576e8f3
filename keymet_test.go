package idem_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestDoMetNeverFailsOpenOverTheRecordAnEarlierCallMet: a caller that polls a key in
// flight elsewhere calls again for it (a batch consumer waiting for the owner). Each call
// is a Do of its own, which by itself knows nothing of the record the earlier ones met:
// with WithFailOpen, the first whose claim the store fails would run the handler over
// the live run. Calls that share a KeyMet (DoMet, Batch.Met) return the store error
// instead, and run nothing; a plain Do, the control, fails open.
//
//   - DoMet: the first DoMet meets the owner's record (ErrInProgress); the store goes
//     down; the second DoMet with the same KeyMet returns ErrStore without running.
//   - BatchMet: a batch claim meets the owner's record (DoClaimed: ErrInProgress); the
//     store's single claims go down; DoMet with the batch's Met of the key returns
//     ErrStore without running.
func TestDoMetNeverFailsOpenOverTheRecordAnEarlierCallMet(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   int // the single claims the store answers before it goes down
		// first makes the first call, which meets the owner's record, and returns the
		// KeyMet the later call shares.
		first func(t *testing.T, g *idem.Guard) *idem.KeyMet
	}{
		{name: "DoMet", ok: 1, first: func(t *testing.T, g *idem.Guard) *idem.KeyMet {
			met := new(idem.KeyMet)
			_, _, err := idem.DoMet(context.Background(), g, idem.Request{Key: "K"}, met,
				func(context.Context) (string, error) { return "second", nil })
			require.ErrorIs(t, err, idem.ErrInProgress)
			return met
		}},
		{name: "BatchMet", first: func(t *testing.T, g *idem.Guard) *idem.KeyMet {
			b := g.Claim(context.Background(), []idem.Request{{Key: "K"}, {Key: "pad"}, {Key: ""}})
			_, _, err := idem.DoClaimed(context.Background(), b, 0,
				func(context.Context) (string, error) { return "second", nil })
			require.ErrorIs(t, err, idem.ErrInProgress)
			assert.Nil(t, b.Met(2), "a request without a key shares nothing")
			assert.Nil(t, b.Met(3), "out of range")
			return b.Met(0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := memstore.New()
			owner, err := idem.New(ms, "op", idem.WithScope("test"))
			require.NoError(t, err)
			started, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				_, _, err := idem.Do(context.Background(), owner, idem.Request{Key: "K"},
					func(context.Context) (string, error) {
						close(started)
						<-release
						return "first", nil
					})
				assert.NoError(t, err)
			}()
			<-started
			defer func() { close(release); <-done }()

			// The first call's single claim passes, if it makes one; then the store's
			// single claims fail. memstore's batch claims pass.
			store := &claimsThenDown{Store: ms, ok: tc.ok}
			g, err := idem.New(store, "op", idem.WithScope("test"), idem.WithFailOpen(true))
			require.NoError(t, err)
			met := tc.first(t, g)
			require.NotNil(t, met)

			var runs atomic.Int32
			fn := func(context.Context) (string, error) { runs.Add(1); return "second", nil }
			_, _, err = idem.DoMet(context.Background(), g, idem.Request{Key: "K"}, met, fn)
			require.ErrorIs(t, err, idem.ErrStore)
			assert.Zero(t, runs.Load(), "ran over the live run whose record an earlier call met")

			_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "K"}, fn)
			require.NoError(t, err, "control: a Do of its own fails open")
			assert.Equal(t, int32(1), runs.Load(), "control")
		})
	}
}
