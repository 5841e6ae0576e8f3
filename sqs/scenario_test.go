package sqs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/sqs"
)

// The scenarios of the package contract, each run through the Lambda runtime's JSON
// handler against every backend.

func TestInFlightKeysAreTheFailures(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ev := loadEvent(t, "sqs-standard-ten")
		inFlight := pick(ev, 1, 5, 8) // 1 is keyed by its Idempotency-Key attribute
		var finish []func()
		for _, i := range []int{1, 5, 8} {
			finish = append(finish, e.claimInFlight(t, ev.Records[i]))
		}

		resp := invoke(t, context.Background(), e.h, ev)
		adaptertest.Golden(t, "sqs-standard-ten-three-in-flight", resp)
		assert.Equal(t, inFlight, adaptertest.Failures(t, resp))
		assert.Equal(t, 7, e.rec.total(), "the other seven ran")
		assert.Zero(t, e.rec.runsOf(inFlight...), "the in-flight ones did not run here")
		for _, o := range e.reports.last(t).Outcomes {
			if o.Failed() {
				assert.Equal(t, sqs.ReasonInProgress, o.Reason, o.MessageID)
			}
		}

		for _, f := range finish {
			f()
		}
		resp = invoke(t, context.Background(), e.h, redeliver(ev, inFlight...))
		assert.Empty(t, adaptertest.Failures(t, resp))
		assert.Equal(t, 3, e.reports.last(t).Replayed)
		assert.Equal(t, 10, e.rec.total(), "the redelivered three replayed without running")
		e.rec.requireOncePerKey(t, ev)
	})
}

func TestSameBatchTwiceRunsNothing(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ev := loadEvent(t, "sqs-standard-ten")
		assert.Empty(t, adaptertest.Failures(t, invoke(t, context.Background(), e.h, ev)))
		assert.Equal(t, 10, e.reports.last(t).Ran)

		resp := invoke(t, context.Background(), e.h, redeliver(ev, pick(ev, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)...))
		assert.JSONEq(t, `{"batchItemFailures":[]}`, string(resp))
		assert.Equal(t, 10, e.reports.last(t).Replayed)
		assert.Equal(t, 10, e.rec.total())
		for acc, cents := range expectedBalances(t, ev) {
			assert.Equal(t, cents, e.ledger.balance(t, acc), acc)
		}
	})
}

func TestIntraBatchDuplicatesRunOnce(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ev := loadEvent(t, "sqs-standard-same-key") // four messages share order-2042-credit
		resp := invoke(t, context.Background(), e.h, ev)
		assert.JSONEq(t, `{"batchItemFailures":[]}`, string(resp))
		assert.Equal(t, 1, e.rec.runsOfKey("order-2042-credit"))
		assert.Equal(t, 1, e.rec.runsOfKey("order-2043-credit"))
		rep := e.reports.last(t)
		assert.Equal(t, 2, rep.Ran)
		assert.Equal(t, 3, rep.Duplicates)
		assert.Equal(t, 4200, e.ledger.balance(t, "acc-7"), "credited once")
	})
}

func TestFIFOFailureStopsOnlyItsGroup(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ev := loadEvent(t, "sqs-fifo-two-groups")
		// acc-1 is records 0, 2, 3, 5, 7; acc-2 is 1, 4, 6. The third of acc-1 fails.
		e.rec.setFail(ev.Records[3].MessageId, errors.New("ledger: account acc-1 locked"))

		resp := invoke(t, context.Background(), e.h, ev)
		adaptertest.Golden(t, "sqs-fifo-two-groups-third-fails", resp)
		assert.Equal(t, pick(ev, 3, 5, 7), adaptertest.Failures(t, resp), "the failed message and the rest of its group, in order")
		assert.Equal(t, pick(ev, 0, 2, 3), e.rec.groupOrder("acc-1"))
		assert.Equal(t, pick(ev, 1, 4, 6), e.rec.groupOrder("acc-2"), "the other group completed")
		rep := e.reports.last(t)
		assert.True(t, rep.FIFO)
		assert.Equal(t, map[sqs.Reason]int{sqs.ReasonHandler: 1, sqs.ReasonGroupStopped: 2}, rep.FailedBy())

		e.rec.setFail(ev.Records[3].MessageId, nil)
		resp = invoke(t, context.Background(), e.h, redeliver(ev, pick(ev, 3, 5, 7)...))
		assert.Empty(t, adaptertest.Failures(t, resp))
		assert.Equal(t, pick(ev, 0, 2, 3, 3, 5, 7), e.rec.groupOrder("acc-1"), "the group resumed in order")
		assert.False(t, e.rec.overlap, "no two messages of a group ran at once")
		for acc, cents := range expectedBalances(t, ev) {
			assert.Equal(t, cents, e.ledger.balance(t, acc), "every credit applied once: %s", acc)
		}
	})
}

func TestNearDeadlineNothingIsDropped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		golden    string
		timeout   time.Duration // of the invocation's context
		fakeLeft  time.Duration // if set, a fake clock starts this long before the deadline
		advance   time.Duration // and moves this much per message run
		opts      []sqs.Option
		wantRan   int
		wantCause error
	}{
		{
			name:     "margin reached after three",
			golden:   "sqs-standard-ten-near-deadline",
			timeout:  time.Hour,
			fakeLeft: 10 * time.Second,
			advance:  2 * time.Second, // 10 s, 8 s, 6 s left: three start; then 4 s < 5 s
			opts:     []sqs.Option{sqs.WithConcurrency(1), sqs.WithDeadlineMargin(5 * time.Second)},
			wantRan:  3,
		},
		{
			name:    "within the margin from the start",
			timeout: time.Minute,
			opts:    []sqs.Option{sqs.WithDeadlineMargin(2 * time.Minute)},
		},
		{
			name:      "deadline already passed",
			wantCause: context.DeadlineExceeded,
		},
		{
			// 4 s is below DefaultDeadlineMargin: the margin becomes a quarter of it, 1 s.
			// The clock is fake and stands still: on a loaded machine a real 4 s timeout
			// can be spent in the first claim, and then rightly no message may start.
			name:     "default margin fits a short timeout",
			timeout:  time.Hour,
			fakeLeft: 4 * time.Second,
			wantRan:  10,
		},
	}
	for _, b := range backends() {
		for _, tc := range tests {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, b, tc.opts...)
				// The clock is set once the backend is ready: creating tables takes time.
				var clock *storetest.Clock
				if tc.fakeLeft > 0 {
					clock = storetest.NewClock()
					e.guard = e.newGuard(t, idem.WithClock(clock))
					e.h = e.newHandler(t, e.guard, tc.opts...)
				}
				e.rec.before = func(context.Context, events.SQSMessage) {
					if clock != nil {
						clock.Advance(tc.advance)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
				t.Cleanup(cancel)
				if clock != nil {
					deadline, _ := ctx.Deadline()
					clock.Advance(deadline.Add(-tc.fakeLeft).Sub(clock.Now()))
				}
				ev := loadEvent(t, "sqs-standard-ten")

				resp := invoke(t, ctx, e.h, ev)
				if tc.golden != "" {
					adaptertest.Golden(t, tc.golden, resp)
				}
				assert.Equal(t, tc.wantRan, e.rec.total())
				assert.Len(t, adaptertest.Failures(t, resp), 10-tc.wantRan, "every message not run is reported")
				for _, o := range e.reports.last(t).Outcomes {
					if !o.Failed() {
						assert.Equal(t, sqs.StatusRan, o.Status)
						continue
					}
					assert.Equal(t, sqs.ReasonNotStarted, o.Reason)
					require.ErrorIs(t, o.Err, sqs.ErrNotStarted)
					if tc.wantCause != nil {
						require.ErrorIs(t, o.Err, tc.wantCause)
					}
				}
			})
		}
	}
}
