package idem_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestSim170_DuplicateWithEndedContextTakesFinishedOutcome: a duplicate whose DoClaimed
// is called with its context already ended, after its key's run in the batch is over,
// is answered that run's outcome, every time. Go's select picks at random among ready
// cases, so waiting on the run and on the context at once answered the outcome or the
// context's error by a coin toss: the simulation replayed one seed (170221822) with 0,
// 1 or 2 violations from run to run.
func TestSim170_DuplicateWithEndedContextTakesFinishedOutcome(t *testing.T) {
	g, err := idem.New(memstore.New(), "op", idem.WithScope("test"))
	require.NoError(t, err)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for n := range 64 { // a coin toss each: all 64 right by chance once in 2^64
		key := fmt.Sprintf("K%d", n)
		req := idem.Request{Key: key, Fingerprint: []byte("a")}
		b := g.Claim(context.Background(), []idem.Request{req, req, {Key: key + "-other"}})
		v, replayed, err := idem.DoClaimed(context.Background(), b, 0,
			func(context.Context) (int, error) { return 7, nil })
		require.NoError(t, err)
		require.False(t, replayed)
		require.Equal(t, 7, v)

		v, replayed, err = idem.DoClaimed(ended, b, 1,
			func(context.Context) (int, error) { return 0, fmt.Errorf("a duplicate ran") })
		require.NoError(t, err, "iteration %d: the run is over, its outcome is in hand", n)
		require.True(t, replayed)
		require.Equal(t, 7, v)
		_, _, err = idem.DoClaimed(context.Background(), b, 2,
			func(context.Context) (int, error) { return 1, nil })
		require.NoError(t, err)
		for i, err := range b.Settle(context.Background()) {
			require.NoError(t, err, "request %d", i)
		}
	}
}
