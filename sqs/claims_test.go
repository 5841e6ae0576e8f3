package sqs_test

import (
	"context"
	"errors"
	"fmt"
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

// failingCompletions is an in-memory batch store whose batch completion fails for chosen
// keys, as DynamoDB does for a lost lease or a failed statement.
type failingCompletions struct {
	*memstore.Store

	mu   sync.Mutex
	fail map[string]error // stored key → error
}

func (s *failingCompletions) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := make([]error, len(recs))
	var ok []*idemstore.Record
	var at []int
	for i, r := range recs {
		if err := s.fail[r.Key]; err != nil {
			errs[i] = err
			continue
		}
		ok, at = append(ok, r), append(at, i)
	}
	for j, err := range s.Store.CompleteMany(ctx, ok) {
		errs[at[j]] = err
	}
	return errs
}

// Complete fails for the chosen keys too, so that a guard resending a failed batched
// completion alone meets the same failure.
func (s *failingCompletions) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	s.mu.Lock()
	err := s.fail[rec.Key]
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Store.Complete(ctx, rec, attached)
}

// TestBatchCompletionFailures fails the recording of a message that ran: it fails with the
// reason a per-message completion would have given, and so do its duplicates.
func TestBatchCompletionFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		err        error
		wantReason sqs.Reason
	}{
		{"lease lost", idem.ErrLeaseLost, sqs.ReasonLeaseLost},
		{"store", &idem.StoreError{Op: "complete", Err: errors.New("throttled")}, sqs.ReasonStore},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := &failingCompletions{Store: memstore.New(), fail: map[string]error{}}
			rec, rs := newRecorder(), &reports{}
			guard, err := idem.New(store, "test", idem.WithHooks(rs.hooks()))
			require.NoError(t, err)
			store.fail[storedKey(t, guard, "order-2042-credit")] = tc.err
			h, err := sqs.New(guard, rec.handle)
			require.NoError(t, err)

			ev := loadEvent(t, "sqs-standard-same-key") // records 0, 1, 3, 4 share a key and a body
			resp := invoke(t, context.Background(), h, ev)
			assert.Equal(t, pick(ev, 0, 1, 3, 4), adaptertest.Failures(t, resp))
			rep := rs.last(t)
			assert.Equal(t, map[sqs.Reason]int{tc.wantReason: 1, sqs.ReasonDuplicateFailed: 3}, rep.FailedBy())
			require.ErrorIs(t, rep.Outcomes[0].Err, tc.err)
			require.ErrorIs(t, rep.Outcomes[4].Err, sqs.ErrDuplicateFailed)
			assert.Equal(t, sqs.StatusRan, rep.Outcomes[2].Status, "the other key completed")
		})
	}
}

// TestBatchSettlesNearTheDeadline lets the margin arrive while a message runs: the message
// finished before it is recorded by then (on the batch path, by the early settle; on the
// per-message path, at once), the running one when it ends, and the rest are not started
// and hold no claim.
func TestBatchSettlesNearTheDeadline(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			// The margin check reads a fake clock that only message 1 moves: how long the
			// claims take on a loaded machine cannot change which messages start. The early
			// settle's timer is real: it fires left-margin = 4 s after the claims.
			const left, margin = 8 * time.Second, 4 * time.Second
			clock := storetest.NewClock()
			e := newEnv(t, b)
			e.guard = e.newGuard(t, idem.WithClock(clock))
			e.h = e.newHandler(t, e.guard, sqs.WithConcurrency(1), sqs.WithDeadlineMargin(margin))
			e.rec.effect = nil // a plain handler: on the batch path its completion waits for a settle
			ev := loadEvent(t, "sqs-standard-ten")
			keyOf := func(i int) string {
				k, err := sqs.DefaultKey(ev.Records[i])
				require.NoError(t, err)
				return storedKey(t, e.guard, k)
			}
			first := keyOf(0)
			var sawFirstDone bool
			e.rec.before = func(ctx context.Context, m events.SQSMessage) {
				if m.MessageId != ev.Records[1].MessageId {
					return
				}
				clock.Advance(left - margin + 100*time.Millisecond) // past the margin
				// Until the settle at the margin has recorded message 0.
				for until := time.Now().Add(30 * time.Second); time.Now().Before(until); time.Sleep(10 * time.Millisecond) {
					rec, err := e.store.Get(ctx, first)
					if err == nil && rec != nil && rec.Status == idemstore.StatusCompleted {
						sawFirstDone = true
						return
					}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			deadline, _ := ctx.Deadline()
			clock.Advance(deadline.Add(-left).Sub(clock.Now()))

			resp := invoke(t, ctx, e.h, ev)
			assert.True(t, sawFirstDone, "message 0 was recorded while message 1 ran")
			assert.Equal(t, pick(ev, 2, 3, 4, 5, 6, 7, 8, 9), adaptertest.Failures(t, resp))
			rep := e.reports.last(t)
			assert.Equal(t, 2, rep.Ran)
			assert.Equal(t, map[sqs.Reason]int{sqs.ReasonNotStarted: 8}, rep.FailedBy())
			for i := range 10 {
				rec, err := e.store.Get(context.Background(), keyOf(i))
				require.NoError(t, err)
				if i < 2 {
					require.NotNil(t, rec, i)
					assert.Equal(t, idemstore.StatusCompleted, rec.Status, i)
				} else {
					assert.False(t, rec.Live(clock.Now()), "message %d holds no claim", i)
				}
			}
		})
	}
}

// TestBatchClaimsTwoKeysOrMore counts store calls: a batch claims its keys together once it
// holds two distinct keys or more, redelivered or not, and a batch of one key (or of one
// key many times) claims it as the per-message path does, where a replay is one round trip.
func TestBatchClaimsTwoKeysOrMore(t *testing.T) {
	t.Parallel()
	delivered := func(id, key, count string) events.SQSMessage {
		m := withKey(message(id, "{}"), key)
		if count == "" {
			m.Attributes = nil
		} else {
			m.Attributes = map[string]string{"ApproximateReceiveCount": count}
		}
		return m
	}
	tests := []struct {
		name   string
		keys   []string
		counts []string
		// store calls of the first delivery and of the replays
		single, many, replaySingle, replayMany int32
	}{
		{name: "all redelivered", keys: []string{"a", "b", "c"}, counts: []string{"2", "5", "3"}, many: 2, replayMany: 1},
		{name: "one first delivery", keys: []string{"a", "b", "c"}, counts: []string{"2", "1", "3"}, many: 2, replayMany: 1},
		{name: "no receive counts", keys: []string{"a", "b", "c"}, counts: []string{"", "", ""}, many: 2, replayMany: 1},
		{name: "two keys", keys: []string{"a", "b"}, counts: []string{"1", "1"}, many: 2, replayMany: 1},
		{name: "one message", keys: []string{"a"}, counts: []string{"1"}, single: 2, replaySingle: 1},
		{name: "one key twice", keys: []string{"a", "a"}, counts: []string{"1", "1"}, single: 2, replaySingle: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := &storeCalls{Store: memstore.New()}
			guard, err := idem.New(store, "test")
			require.NoError(t, err)
			h, err := sqs.New(guard, func(context.Context, events.SQSMessage) error { return nil })
			require.NoError(t, err)
			var ev events.SQSEvent
			for i, c := range tc.counts {
				ev.Records = append(ev.Records, delivered(fmt.Sprintf("m-%d", i), tc.keys[i], c))
			}
			rep, err := h.Process(adaptertest.Context(t), ev)
			require.NoError(t, err)
			assert.Zero(t, rep.Failed)
			assert.Equal(t, tc.single, store.single.Load(), "single-key store calls")
			assert.Equal(t, tc.many, store.many.Load(), "batch store calls")

			// Delivered again, all of them: replays.
			store.single.Store(0)
			store.many.Store(0)
			for i := range ev.Records {
				ev.Records[i].Attributes = map[string]string{"ApproximateReceiveCount": "9"}
			}
			rep, err = h.Process(adaptertest.Context(t), ev)
			require.NoError(t, err)
			assert.Zero(t, rep.Failed)
			assert.Equal(t, tc.replaySingle, store.single.Load(), "single-key store calls, replays")
			assert.Equal(t, tc.replayMany, store.many.Load(), "batch store calls, replays")
		})
	}
}

// waitFor polls cond until it holds, and fails the test if it does not within a generous
// bound: the bound only keeps a broken build from hanging, it times nothing.
func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	for until := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(until) {
			require.Fail(t, msg)
		}
	}
}

// statusOf returns the status of key's record in e's store, or "" when there is none or
// it holds no key (the tombstone a release leaves).
func (e *env) statusOf(t *testing.T, key string) idemstore.Status {
	t.Helper()
	rec, err := e.store.Get(context.Background(), storedKey(t, e.guard, key))
	require.NoError(t, err)
	if !rec.Live(e.guard.Clock().Now()) {
		return ""
	}
	return rec.Status
}

// TestBatchRecordsOutcomesAfterTheEarlySettle lets the deadline margin arrive while messages
// a and b run and c waits for a worker: the early settle releases c; then a finishes, and its
// outcome must be recorded at once, while b still runs, since Lambda may kill the
// invocation at its deadline before any later settle.
func TestBatchRecordsOutcomesAfterTheEarlySettle(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			const left, margin = 10 * time.Second, 4 * time.Second
			clock := storetest.NewManualClock()
			e := newEnv(t, b)
			e.guard = e.newGuard(t, idem.WithClock(clock))
			e.h = e.newHandler(t, e.guard, sqs.WithConcurrency(2), sqs.WithDeadlineMargin(margin))
			e.rec.effect = nil // a plain handler: on the batch path its completion may wait for a settle
			aStarted, aGo, bStarted, bGo := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
			var aOnce, bOnce sync.Once
			finishA, finishB := func() { aOnce.Do(func() { close(aGo) }) }, func() { bOnce.Do(func() { close(bGo) }) }
			t.Cleanup(func() { finishA(); finishB() }) // should the test fail with the handlers held
			e.rec.before = func(_ context.Context, m events.SQSMessage) {
				switch m.MessageId {
				case "a":
					close(aStarted)
					<-aGo
				case "b":
					close(bStarted)
					<-bGo
				}
			}
			ev := events.SQSEvent{Records: []events.SQSMessage{message("a", `{"n":1}`), message("b", `{"n":2}`), message("c", `{"n":3}`)}}
			ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(left)) // in the clock's time
			defer cancel()
			done := make(chan []byte, 1)
			go func() { done <- invoke(t, ctx, e.h, ev) }()
			<-aStarted
			<-bStarted

			clock.Advance(left - margin + time.Second) // the early settle
			waitFor(t, func() bool { return e.statusOf(t, "c") == "" }, "the early settle released c")
			finishA()
			waitFor(t, func() bool { return e.statusOf(t, "a") == idemstore.StatusCompleted },
				"a, finished after the early settle, is recorded while b still runs")
			finishB()

			assert.Equal(t, []string{"c"}, adaptertest.Failures(t, <-done))
			rep := e.reports.last(t)
			assert.Equal(t, 2, rep.Ran)
			assert.Equal(t, map[sqs.Reason]int{sqs.ReasonNotStarted: 1}, rep.FailedBy())
			assert.Equal(t, idemstore.StatusCompleted, e.statusOf(t, "b"))
		})
	}
}

// TestBatchRecordsOutcomesBeforeTheirLeasesEnd caps the lease (WithMaxLease) below the
// function timeout: message a finishes, b runs past a's lease end, and meanwhile another
// invocation gets a redelivered a. a must have been recorded before its lease ended, so
// the redelivery replays it rather than running it again, and the first batch reports a
// as run, as the per-message path does.
func TestBatchRecordsOutcomesBeforeTheirLeasesEnd(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			const timeout = 15 * time.Minute
			clock := storetest.NewManualClock()
			e := newEnv(t, b)
			e.guard = e.newGuard(t, idem.WithClock(clock), idem.WithMaxLease(time.Minute))
			e.h = e.newHandler(t, e.guard, sqs.WithConcurrency(1))
			other := e.newHandler(t, e.newGuard(t, idem.WithClock(clock), idem.WithMaxLease(time.Minute)))
			e.rec.effect = nil // a plain handler: on the batch path its completion may wait for a settle
			ev := events.SQSEvent{Records: []events.SQSMessage{message("a", `{"n":1}`), message("b", `{"n":2}`)}}
			var redelivery *sqs.Report
			e.rec.before = func(_ context.Context, m events.SQSMessage) {
				if m.MessageId != "b" {
					return
				}
				clock.Advance(2 * time.Minute) // past a's lease: claim + 1 min + the margin
				ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(timeout))
				defer cancel()
				var err error
				redelivery, err = other.Process(ctx, redeliver(ev, "a"))
				require.NoError(t, err)
			}
			ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(timeout)) // in the clock's time
			defer cancel()
			assert.Empty(t, adaptertest.Failures(t, invoke(t, ctx, e.h, ev)))

			assert.Equal(t, 1, e.rec.runsOf("a"), "a ran once")
			require.NotNil(t, redelivery)
			assert.Equal(t, sqs.StatusReplayed, redelivery.Outcomes[0].Status, "the redelivery of a replays it")
			rep := e.reports.last(t)
			assert.Equal(t, sqs.StatusRan, rep.Outcomes[0].Status, "a: %v", rep.Outcomes[0].Err)
		})
	}
}
