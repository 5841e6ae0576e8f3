package sqs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// heldCompletions is failingCompletions whose batch completion says it was entered and
// waits for release before it answers.
type heldCompletions struct {
	*failingCompletions
	entered, release chan struct{}
	once             sync.Once
}

func (s *heldCompletions) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return s.failingCompletions.CompleteMany(ctx, recs)
}

// TestBatchReportsWhatTheEarlySettleFailedToRecord: the early settle (at the deadline
// margin) sends message a's completion, which the store holds while the other messages
// finish and the batch ends, then refuses (ErrLeaseLost). The batch response must fail a,
// with the reason a per-message completion would give: the final settle answers the early
// one's recording, never nil for an outcome still being recorded.
func TestBatchReportsWhatTheEarlySettleFailedToRecord(t *testing.T) {
	t.Parallel()
	const left, margin = 10 * time.Second, 4 * time.Second
	clock := storetest.NewManualClock()
	store := &heldCompletions{
		failingCompletions: &failingCompletions{Store: memstore.New(), fail: map[string]error{}},
		entered:            make(chan struct{}), release: make(chan struct{}),
	}
	rec, rs := newRecorder(), &reports{}
	guard, err := idem.New(store, "test", idem.WithScope("ledger-credits"), idem.WithHooks(rs.hooks()), idem.WithClock(clock))
	require.NoError(t, err)
	store.fail[storedKey(t, guard, "a")] = idem.ErrLeaseLost
	h, err := sqs.New(guard, rec.handle, sqs.WithConcurrency(2), sqs.WithDeadlineMargin(margin), sqs.WithBatchClaims(true))
	require.NoError(t, err)

	bStarted, cStarted, finish := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var finishOnce, releaseOnce sync.Once
	t.Cleanup(func() { // should the test fail with the handlers or the store held
		finishOnce.Do(func() { close(finish) })
		releaseOnce.Do(func() { close(store.release) })
	})
	rec.before = func(_ context.Context, m events.SQSMessage) {
		switch m.MessageId {
		case "b":
			close(bStarted)
			<-finish
		case "c":
			close(cStarted) // a's worker is free: a's outcome waits for a settle
			<-finish
		}
	}
	ev := events.SQSEvent{Records: []events.SQSMessage{message("a", `{"n":1}`), message("b", `{"n":2}`), message("c", `{"n":3}`)}}
	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(left)) // in the clock's time
	defer cancel()
	done := make(chan []byte, 1)
	go func() { done <- invoke(t, ctx, h, ev) }()
	<-bStarted
	<-cStarted

	clock.Advance(left - margin + time.Second) // the early settle
	select {
	case <-store.entered:
	case <-time.After(10 * time.Second):
		require.Fail(t, "the early settle did not send a's completion")
	}
	finishOnce.Do(func() { close(finish) }) // b and c end, recorded at once, and the batch ends
	statusOf := func(key string) idemstore.Status {
		r, err := store.Get(context.Background(), storedKey(t, guard, key))
		require.NoError(t, err)
		if r == nil {
			return ""
		}
		return r.Status
	}
	waitFor(t, func() bool {
		return statusOf("b") == idemstore.StatusCompleted && statusOf("c") == idemstore.StatusCompleted
	}, "b and c, finished after the early settle, are recorded")
	releaseOnce.Do(func() { close(store.release) }) // the store answers the early settle: lease lost

	assert.Equal(t, []string{"a"}, adaptertest.Failures(t, <-done))
	rep := rs.last(t)
	assert.Equal(t, map[sqs.Reason]int{sqs.ReasonLeaseLost: 1}, rep.FailedBy())
	assert.ErrorIs(t, rep.Outcomes[0].Err, idem.ErrLeaseLost)
}
