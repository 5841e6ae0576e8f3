package idem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// TestReview23_DoMetHonoursOnRefused: DoMet's doc says it "is Do" for calls sharing a
// KeyMet, and that a nil met is Do itself; OnRefused's doc says it applies to Do and is
// ignored only in a batch (Guard.Claim, DoClaimed). So a DoMet caller (one polling a key
// in flight elsewhere, as the doc suggests) whose handler chose a result for refused
// writes must get what Do gives: the chosen "402" stored, and a retry, even once funds
// arrive, replaying it. DoMet with a non-nil KeyMet instead runs the guard's batch path
// (doLeaving's inBatch = known != nil), which drops OnRefused: the key is released, the
// caller gets the refusal, and the retry runs the handler again and debits (a retry not
// getting the first answer). Do, the control, passes.
func TestReview23_DoMetHonoursOnRefused(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"Do", "DoMet"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := &refusingStore{Store: &memstore.Store{}}
			acct := &account{}
			g, err := idem.New(s, "pay", idem.WithClock(storetest.NewSettableClock()))
			require.NoError(t, err)
			met := new(idem.KeyMet) // shared by every call of the key, as DoMet's doc says
			runs := 0
			pay := func() (string, bool, error) {
				req := idem.Request{Key: "pay-1", Fingerprint: []byte("100")}
				fn := func(ctx context.Context) (string, error) {
					runs++
					if err := idem.Attach(ctx, acct.debit(100)); err != nil {
						return "", err
					}
					return "201", idem.OnRefused(ctx, func(_ context.Context, err error) (any, bool) {
						var fe *fundsError
						return "402", errors.As(err, &fe)
					})
				}
				if name == "Do" {
					return idem.Do(context.Background(), g, req, fn)
				}
				return idem.DoMet(context.Background(), g, req, met, fn)
			}
			v, _, err := pay()
			require.NoError(t, err, "%s: the refusal is answered with the chosen result", name)
			assert.Equal(t, "402", v)
			acct.mu.Lock()
			acct.balance = 100 // funds arrive: the retry must still get the first answer
			acct.mu.Unlock()
			v, replayed, err := pay()
			require.NoError(t, err)
			assert.True(t, replayed, "%s: the retry replays the chosen result", name)
			assert.Equal(t, "402", v)
			assert.Equal(t, 1, runs, "%s: the handler ran again on the retry", name)
			assert.Equal(t, 100, acct.get(), "%s: the retry debited", name)
		})
	}
}
