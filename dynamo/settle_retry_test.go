package dynamo_test

// Failing tests from the hostile review of the at-most-once fixes (branch review).

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore/storetest"
)

// failFirstUpdateBatch fails the first BatchExecuteStatement made of PartiQL UPDATEs (the
// store's CompleteMany) before it reaches DynamoDB: the call failed for good after the
// SDK's retries (throttling, a 5xx). Everything else goes through.
type failFirstUpdateBatch struct {
	dynamo.API
	failed atomic.Bool
	calls  atomic.Int32
}

var errReviewThrottled = errors.New("ThrottlingException (injected)")

func (f *failFirstUpdateBatch) BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	if len(in.Statements) > 0 && strings.HasPrefix(aws.ToString(in.Statements[0].Statement), "UPDATE") {
		f.calls.Add(1)
		if f.failed.CompareAndSwap(false, true) {
			return nil, errReviewThrottled
		}
	}
	return f.API.BatchExecuteStatement(ctx, in, opts...)
}

// REVIEW HOLE 1 on DynamoDB Local (double execution, batch path).
//
// Path: Guard.Claim (PartiQL INSERT) → DoClaimed leaves the outcome pending → Batch.Settle
// → Store.CompleteMany: its one BatchExecuteStatement fails (callErr) → every record gets
// an ErrStore, with no resend and no read-back (Guard.writeCompletion, which Do uses, would resend
// with backoff and then read the record back) → the record stays INPROGRESS; sqs fails the
// message; the redelivery after the lease ended takes the key over and runs the handler
// again.
func TestReviewSettleCompleteManyFailsOnceRunsTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	api := &failFirstUpdateBatch{API: e.api}
	store, err := dynamo.New(api, e.table)
	require.NoError(t, err)
	clock := storetest.NewClock()
	g, err := idem.New(store, "review", idem.WithClock(clock))
	require.NoError(t, err)
	req := idem.Request{Key: "credit-1"}
	var runs atomic.Int32
	fn := func(context.Context) (int, error) { runs.Add(1); return 5, nil }

	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(time.Minute))
	defer cancel()
	// A second request, completed too: a batch with one key to claim is claimed singly.
	b := g.Claim(ctx, []idem.Request{req, {Key: "credit-2"}})
	_, _, err = idem.DoClaimed(ctx, b, 0, fn)
	require.NoError(t, err)
	_, _, err = idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) { return 6, nil })
	require.NoError(t, err)
	settleErrs := b.Settle(ctx)
	assert.Equal(t, int32(1), api.calls.Load(), "Settle made one CompleteMany call and no other")

	clock.Advance(2 * time.Minute) // the redelivery, after the lease (deadline plus margin)
	ctx2, cancel2 := context.WithDeadline(context.Background(), clock.Now().Add(time.Minute))
	defer cancel2()
	_, replayed, err := idem.Do(ctx2, g, req, fn)
	require.NoError(t, err)
	assert.NoError(t, settleErrs[0], "one failed CompleteMany call is resent, as Do resends a failed completion")
	assert.True(t, replayed, "the redelivery replays the first run's result")
	assert.Equal(t, int32(1), runs.Load(), "the handler ran once per key")
}
