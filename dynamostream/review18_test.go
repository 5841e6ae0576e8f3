package dynamostream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/memstore"
)

// crashClaim claims the records' keys as an invocation that dies before it settles leaves
// them: in progress until leaseFor from now plus a 100 ms margin, and never before a
// second from now (the guard's shortest lease). Give it two records or more: a batch
// claim of a single key claims nothing.
func crashClaim(t *testing.T, store *memstore.Store, scope string, leaseFor time.Duration, recs ...events.DynamoDBEventRecord) {
	t.Helper()
	other, err := idem.New(store, scope, idem.WithLeaseMargin(100*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), leaseFor)
	defer cancel()
	var reqs []idem.Request
	for _, r := range recs {
		fp, err := dynamostream.ChangeFingerprint(r)
		require.NoError(t, err)
		reqs = append(reqs, idem.Request{Key: r.EventID, Fingerprint: fp})
	}
	other.Claim(ctx, reqs) // never settled
}

// TestReview18_WaitInFlightResponse: through the adapter, with WithWaitInFlight. A record
// whose key a crashed claim holds past the invocation's cut-off is reported failed (its
// sequence number in the partial batch response, never acknowledged), the later change of
// its item is not run, and other items run; when the claim's lease ends before the cut-off
// the record is taken over, runs once, and the batch is acknowledged whole. (Passes on
// main: coverage of the response a waiter gives.)
func TestReview18_WaitInFlightResponse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		lease    time.Duration
		failures []string
		ran      []string
	}{
		{"LeaseBeyondTheCutoff", time.Hour, []string{"2"}, []string{"1", "4"}},
		{"LeaseEndsBeforeTheCutoff", 300 * time.Millisecond, []string{}, []string{"1", "2", "3", "4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := memstore.New()
			recs := []events.DynamoDBEventRecord{
				change("1", "o-a", "NEW"), change("2", "o-b", "NEW"), change("3", "o-b", "PAID"), change("4", "o-c", "NEW"),
			}
			// Two keys: a batch claim of a single key claims nothing (idem.Guard.Claim).
			crashClaim(t, store, "review18-ds", tc.lease, recs[1], change("9", "o-z", "NEW"))
			g, err := idem.New(store, "review18-ds")
			require.NoError(t, err)
			var mu sync.Mutex
			var ran []string
			h, err := dynamostream.New(g, func(_ context.Context, r events.DynamoDBEventRecord) error {
				mu.Lock()
				defer mu.Unlock()
				ran = append(ran, r.Change.SequenceNumber)
				return nil
			}, dynamostream.WithWaitInFlight(true), dynamostream.WithDeadlineMargin(time.Second))
			require.NoError(t, err)
			// Cut-off 2 s in: after the 300 ms claim's lease, which lasts the guard's
			// minimum of one second.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: recs})
			require.NoError(t, err)
			got := []string{}
			for _, f := range resp.BatchItemFailures {
				got = append(got, f.ItemIdentifier)
			}
			assert.Equal(t, tc.failures, got)
			mu.Lock()
			defer mu.Unlock()
			assert.ElementsMatch(t, tc.ran, ran)
			for i, s := range ran {
				if s == "3" {
					assert.Contains(t, ran[:i], "2", "3 after 2, its item's earlier change")
				}
			}
		})
	}
}
