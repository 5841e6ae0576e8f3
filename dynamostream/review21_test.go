package dynamostream_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// blipStore is a memstore.Store whose single claims (idem.Do's) fail while failing is
// set, as a throttled DynamoDB answers; its batch claims (memstore's ClaimMany) pass.
type blipStore struct {
	*memstore.Store
	failing atomic.Bool
}

func (s *blipStore) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	if s.failing.Load() {
		return nil, false, errors.New("ProvisionedThroughputExceededException: throttled")
	}
	return s.Store.Claim(ctx, rec, now)
}

// TestReview21_WaitInFlightFailsOpenOverADuplicateInvocation: through the adapter. Lambda
// delivers one stream batch to two invocations at once (at-least-once delivery), and the
// guard has idem.WithFailOpen. Invocation A claims the batch's keys and runs record 1.
// Invocation B, with dynamostream.WithWaitInFlight, meets both keys in progress in its
// batch claim and waits. While it waits, the store throttles single claims for a moment:
// B's poll (an idem.Do of its own, see batch.waitInFlight) has met no record as far as
// the guard knows, so it fails open and runs record 1 unguarded while A's run of it is
// still under way. The guard promises the opposite (idem.WithFailOpen: once a claim or
// poll met the record holding the key, a store failure returns the store error).
//
// Expected: B reports record 1 failed (the store error or in progress) without running
// it; the handler runs record 1 once, in A. Severity: double execution (with
// WithFailOpen, a store blip during a wait; the same blip without WithWaitInFlight runs
// nothing, as B's batch claim met A's record).
//
// Fails on main: record 1's handler runs twice, once in each invocation.
func TestReview21_WaitInFlightFailsOpenOverADuplicateInvocation(t *testing.T) {
	t.Parallel()
	store := &blipStore{Store: memstore.New()}
	g, err := idem.New(store, "review21-ds", idem.WithFailOpen(true))
	require.NoError(t, err)
	recs := []events.DynamoDBEventRecord{change("1", "o-a", "NEW"), change("2", "o-b", "NEW")}

	var mu sync.Mutex
	runs := map[string]int{}
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h, err := dynamostream.New(g, func(_ context.Context, r events.DynamoDBEventRecord) error {
		mu.Lock()
		runs[r.Change.SequenceNumber]++
		first := runs[r.Change.SequenceNumber] == 1
		mu.Unlock()
		if r.Change.SequenceNumber == "1" && first {
			once.Do(func() { close(started) })
			<-release // A's run of record 1 is slow
		}
		return nil
	}, dynamostream.WithWaitInFlight(true), dynamostream.WithDeadlineMargin(time.Second))
	require.NoError(t, err)

	aDone := make(chan events.DynamoDBEventResponse, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: recs})
		assert.NoError(t, err)
		aDone <- resp
	}()
	<-started
	store.failing.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	respB, err := h.Handle(ctx, events.DynamoDBEvent{Records: recs})
	require.NoError(t, err)
	store.failing.Store(false)
	close(release)
	respA := <-aDone

	t.Logf("A: %+v; B: %+v", respA.BatchItemFailures, respB.BatchItemFailures)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, runs["1"], "record 1 ran in both invocations")
	assert.NotEmpty(t, respB.BatchItemFailures, "B acknowledged record 1 that it ran unguarded over A's run")
}
