package idem_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// errConnReset is a store failure that does not come from the caller's context.
var errConnReset = fmt.Errorf("%w: connection reset", idem.ErrStore)

// endingClaimStore is an in-memory batch store whose claims end the caller's context while
// they are in flight and then fail with a store error of their own, as a request that was
// still out when a Lambda deadline passed and then failed on the network would.
type endingClaimStore struct {
	*memstore.Store
	end func()
}

func (s *endingClaimStore) Claim(context.Context, *idemstore.Record, time.Time) (*idemstore.Record, bool, error) {
	s.end()
	return nil, false, errConnReset
}

func (s *endingClaimStore) ClaimMany(_ context.Context, recs []*idemstore.Record, _ time.Time) []idemstore.ClaimResult {
	s.end()
	out := make([]idemstore.ClaimResult, len(recs))
	for i := range out {
		out[i].Err = errConnReset
	}
	return out
}

// TestFailOpenNeverOnEndedContext: with WithFailOpen, a claim that fails with a store error
// of its own while the caller's context has ended (cancelled, or past its deadline) never
// runs the handler unguarded, through Do or DoClaimed: the caller is gone, and nobody would
// get its result.
func TestFailOpenNeverOnEndedContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		deadline bool // the context ends at its deadline, else by cancel
		batch    bool
	}{
		{name: "Do, cancelled"},
		{name: "Do, deadline passed", deadline: true},
		{name: "DoClaimed, cancelled", batch: true},
		{name: "DoClaimed, deadline passed", deadline: true, batch: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			end := cancel // the context ends while the claim is in flight
			if tc.deadline {
				// The deadline passed while the claim was in flight.
				ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
				end = func() {}
			}
			defer cancel()
			s := &endingClaimStore{Store: memstore.New(), end: end}
			g, err := idem.New(s, "test", idem.WithFailOpen(true))
			require.NoError(t, err)
			fn := func(context.Context) (int, error) {
				t.Error("ran unguarded for a caller whose context had ended")
				return 1, nil
			}
			if tc.batch {
				b := g.Claim(ctx, []idem.Request{{Key: "k"}})
				_, _, err = idem.DoClaimed(ctx, b, 0, fn)
			} else {
				_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
			}
			require.ErrorIs(t, err, idem.ErrStore, "the claim's failure is the caller's answer")
		})
	}
}

// metRecordStore is an in-memory batch store whose claims meet a completed record but fail
// to read all of it, as the DynamoDB store's do when the read of a result kept in an item
// of its own fails: the record that refused the claim comes back with the error
// (idemstore.Store's Claim contract).
type metRecordStore struct {
	*memstore.Store
	met *idemstore.Record
}

func (s *metRecordStore) Claim(context.Context, *idemstore.Record, time.Time) (*idemstore.Record, bool, error) {
	met := *s.met
	return &met, false, &idem.StoreError{Op: "claim", Err: errConnReset}
}

func (s *metRecordStore) ClaimMany(_ context.Context, recs []*idemstore.Record, _ time.Time) []idemstore.ClaimResult {
	out := make([]idemstore.ClaimResult, len(recs))
	for i := range out {
		met := *s.met
		out[i] = idemstore.ClaimResult{Prev: &met, Err: &idem.StoreError{Op: "claim", Err: errConnReset}}
	}
	return out
}

// TestFailOpenNeverWhenTheClaimMetARecord: the guard fails open only when the store could
// not learn the key's state. A claim that met the record holding the key (here a completed
// one) but could not read all of it returns that record with its error; the guard, with
// WithFailOpen, then returns the store error (retry later) through Do and DoClaimed, and
// never runs the handler unguarded: the key may be completed, or in progress elsewhere.
func TestFailOpenNeverWhenTheClaimMetARecord(t *testing.T) {
	t.Parallel()
	for _, status := range []idemstore.Status{idemstore.StatusCompleted, idemstore.StatusInProgress} {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batch=%v", status, batch), func(t *testing.T) {
				t.Parallel()
				now := time.Now()
				s := &metRecordStore{Store: memstore.New()}
				unguarded := 0
				g, err := idem.New(s, "test", idem.WithFailOpen(true), idem.WithHooks(idem.Hooks{
					OnUnguarded: func(context.Context, idem.Event) { unguarded++ },
				}))
				require.NoError(t, err)
				key, err := g.StoredKey(idem.Request{Key: "k"})
				require.NoError(t, err)
				s.met = &idemstore.Record{
					Key: key, Status: status, Expires: now.Add(time.Hour), LeaseExpires: now.Add(time.Minute),
					LeaseToken: "owner", Encoding: "json", Version: idemstore.SchemaVersion,
				}
				if status == idemstore.StatusCompleted {
					s.met.LeaseExpires = time.Time{}
				}
				fn := func(context.Context) (int, error) {
					t.Error("ran unguarded although the claim met the key's record")
					return 1, nil
				}
				ctx := context.Background()
				var replayed bool
				if batch {
					b := g.Claim(ctx, []idem.Request{{Key: "k"}})
					_, replayed, err = idem.DoClaimed(ctx, b, 0, fn)
				} else {
					_, replayed, err = idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
				}
				require.ErrorIs(t, err, idem.ErrStore, "the claim's failure is the caller's answer: retry later")
				var se *idem.StoreError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, "claim", se.Op, "the handler did not run")
				assert.False(t, replayed)
				assert.Zero(t, unguarded, "OnUnguarded")
			})
		}
	}
}
