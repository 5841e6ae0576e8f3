package sqs_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqs"
)

// recorder is the message handler of the tests. It records every run: per message, per key,
// the order within each FIFO group, and how many ran at once. It fails the messages named
// in fail, and calls effect (the side effect, usually attached to the completion) and
// before (for example to move a fake clock) when set.
type recorder struct {
	effect func(context.Context, events.SQSMessage) error
	before func(context.Context, events.SQSMessage)

	mu       sync.Mutex
	fail     map[string]error
	runs     map[string]int      // message ID → runs
	keyRuns  map[string]int      // idempotency key → runs
	order    map[string][]string // FIFO group → message IDs in the order they ran
	inGroup  map[string]int      // FIFO group → messages running now
	overlap  bool                // two messages of one group ran at once
	running  int
	peak     int
	panicsOn string
}

func newRecorder() *recorder {
	return &recorder{
		fail:    map[string]error{},
		runs:    map[string]int{},
		keyRuns: map[string]int{},
		order:   map[string][]string{},
		inGroup: map[string]int{},
	}
}

func (r *recorder) handle(ctx context.Context, m events.SQSMessage) error {
	key, err := sqs.DefaultKey(m)
	if err != nil {
		return err
	}
	group := m.Attributes["MessageGroupId"]
	r.mu.Lock()
	r.runs[m.MessageId]++
	r.keyRuns[key]++
	r.running++
	r.peak = max(r.peak, r.running)
	if group != "" {
		r.order[group] = append(r.order[group], m.MessageId)
		r.inGroup[group]++
		r.overlap = r.overlap || r.inGroup[group] > 1
	}
	failWith, panics := r.fail[m.MessageId], r.panicsOn == m.MessageId
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running--
		if group != "" {
			r.inGroup[group]--
		}
		r.mu.Unlock()
	}()

	if r.before != nil {
		r.before(ctx, m)
	}
	if panics {
		panic("ledger corrupted")
	}
	if failWith != nil {
		return failWith
	}
	if r.effect != nil {
		return r.effect(ctx, m)
	}
	return nil
}

func (r *recorder) setFail(id string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.fail, id)
		return
	}
	r.fail[id] = err
}

// runsOf sums the runs of the messages ids.
func (r *recorder) runsOf(ids ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, id := range ids {
		n += r.runs[id]
	}
	return n
}

func (r *recorder) runsOfKey(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keyRuns[key]
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.runs {
		n += c
	}
	return n
}

// requireOncePerKey checks that every key of ev ran exactly once.
func (r *recorder) requireOncePerKey(t testing.TB, ev events.SQSEvent) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range ev.Records {
		key, err := sqs.DefaultKey(m)
		require.NoError(t, err)
		require.Equal(t, 1, r.keyRuns[key], "runs of the key of message %s", m.MessageId)
	}
}

func (r *recorder) groupOrder(group string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.order[group]...)
}

// reports collects the batch reports of the handlers on a guard, through the guard's
// OnBatch hook.
type reports struct {
	mu   sync.Mutex
	list []*sqs.Report
}

// hooks returns the guard hooks that collect the reports: each batch event, read back as
// the sqs.Report it describes, so that the tests check what the hook received.
func (rs *reports) hooks() idem.Hooks {
	return idem.Hooks{OnBatch: func(_ context.Context, e idem.BatchEvent) {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		rs.list = append(rs.list, reportOf(e))
	}}
}

// reportOf reads a batch event back as the sqs.Report it was made from, but for what the
// event leaves out: keys, groups and per-message durations.
func reportOf(e idem.BatchEvent) *sqs.Report {
	rep := &sqs.Report{
		FIFO: e.FIFO, Ran: e.Ran, Replayed: e.Replayed, Duplicates: e.Duplicates, Failed: e.Failed,
		Duration: e.Duration, Outcomes: make([]sqs.Outcome, len(e.Items)),
	}
	for i, it := range e.Items {
		rep.Outcomes[i] = sqs.Outcome{MessageID: it.ID, Status: sqs.Status(it.Status), Reason: sqs.Reason(it.Reason), Err: it.Err}
	}
	return rep
}

func (rs *reports) last(t testing.TB) *sqs.Report {
	t.Helper()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	require.NotEmpty(t, rs.list)
	return rs.list[len(rs.list)-1]
}
