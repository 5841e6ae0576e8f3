package sqs_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/sqs"
)

// Tests of outcome.go: the report of a batch and the response built from it.

func TestEmptyBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, memBackend())
	out, err := lambda.NewHandler(e.h.Handle).Invoke(context.Background(), []byte(`{"Records":[]}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"batchItemFailures":[]}`, string(out))
}

func TestMessageDeliveredTwiceInABatchIsReportedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, memBackend())
	ev := loadEvent(t, "sqs-standard-ten")
	ev.Records = append(ev.Records, ev.Records[2])
	e.rec.setFail(ev.Records[2].MessageId, errors.New("ledger: timeout"))

	resp := invoke(t, context.Background(), e.h, ev)
	assert.Equal(t, pick(ev, 2), adaptertest.Failures(t, resp))
	assert.Equal(t, 1, e.rec.runsOf(ev.Records[2].MessageId))
}

// A report's response lists each failed message once, in the event's order, and an empty
// list (never null) when nothing failed; FailedBy counts the failures by reason.
func TestReport(t *testing.T) {
	t.Parallel()
	errFrozen := errors.New("ledger: account frozen")
	ran := func(id string) sqs.Outcome { return sqs.Outcome{MessageID: id, Status: sqs.StatusRan} }
	failed := func(id string, r sqs.Reason) sqs.Outcome {
		return sqs.Outcome{MessageID: id, Status: sqs.StatusFailed, Reason: r, Err: errFrozen}
	}
	tests := []struct {
		name     string
		outcomes []sqs.Outcome
		want     string // the response as JSON
		failedBy map[sqs.Reason]int
	}{
		{
			name: "nothing failed",
			outcomes: []sqs.Outcome{ran("m-1"), {MessageID: "m-2", Status: sqs.StatusReplayed},
				{MessageID: "m-3", Status: sqs.StatusDuplicate}},
			want:     `{"batchItemFailures":[]}`,
			failedBy: map[sqs.Reason]int{},
		},
		{
			name:     "no messages",
			want:     `{"batchItemFailures":[]}`,
			failedBy: map[sqs.Reason]int{},
		},
		{
			name: "failures in the event's order",
			outcomes: []sqs.Outcome{failed("m-3", sqs.ReasonInProgress), ran("m-1"),
				failed("m-2", sqs.ReasonHandler), failed("m-4", sqs.ReasonInProgress)},
			want:     `{"batchItemFailures":[{"itemIdentifier":"m-3"},{"itemIdentifier":"m-2"},{"itemIdentifier":"m-4"}]}`,
			failedBy: map[sqs.Reason]int{sqs.ReasonInProgress: 2, sqs.ReasonHandler: 1},
		},
		{
			name: "a message delivered twice fails once",
			outcomes: []sqs.Outcome{failed("m-1", sqs.ReasonHandler), ran("m-2"),
				failed("m-1", sqs.ReasonDuplicateFailed)},
			want:     `{"batchItemFailures":[{"itemIdentifier":"m-1"}]}`,
			failedBy: map[sqs.Reason]int{sqs.ReasonHandler: 1, sqs.ReasonDuplicateFailed: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := &sqs.Report{Outcomes: tc.outcomes}
			for _, o := range tc.outcomes {
				assert.Equal(t, o.Status == sqs.StatusFailed, o.Failed(), o.MessageID)
				if o.Failed() {
					rep.Failed++
				}
			}
			got, err := json.Marshal(rep.Response())
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(got))
			assert.Equal(t, tc.failedBy, rep.FailedBy())
		})
	}
}
