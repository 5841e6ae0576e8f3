package emf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// rawKey stands for a caller's key that is personal data.
const rawKey = "customer-4711@example.com"

// Every hook records its metric, and neither the raw key nor the stored key's hash reaches
// the output.
func TestHooksCountEveryOutcome(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := newRecorder(t, &out, emf.WithDimension("Service", "orders"))
	store := storetest.NewFaulty(memstore.New())
	g, err := idem.New(store, "test", idem.WithHooks(r.Hooks()))
	require.NoError(t, err)
	ctx := context.Background()
	req := func(key, body string) idem.Request {
		return idem.Request{Key: key, Fingerprint: []byte(body)}
	}
	ok := func(context.Context) (string, error) { return "done", nil }

	_, _, err = idem.Do(ctx, g, req(rawKey, "a"), ok) // claimed, completed
	require.NoError(t, err)
	_, replayed, err := idem.Do(ctx, g, req(rawKey, "a"), ok) // replayed
	require.NoError(t, err)
	require.True(t, replayed)
	_, _, err = idem.Do(ctx, g, req(rawKey, "b"), ok) // mismatch
	require.ErrorIs(t, err, idem.ErrPayloadMismatch)
	errDeclined := errors.New("card declined")
	_, _, err = idem.Do(ctx, g, req("k-2", "a"), func(context.Context) (string, error) {
		return "", errDeclined // claimed, released
	})
	require.ErrorIs(t, err, errDeclined)
	_, _, err = idem.Do(ctx, g, req("k-3", "a"), func(ctx context.Context) (string, error) {
		_, _, err := idem.Do(ctx, g, req("k-3", "a"), ok) // claimed, then in progress
		return "", err
	})
	require.ErrorIs(t, err, idem.ErrInProgress)
	store.Fail("claim", errors.New("throttled"), false) // store error
	_, _, err = idem.Do(ctx, g, req("k-4", "a"), ok)
	require.ErrorIs(t, err, idem.ErrStore)
	store.Fail("claim", nil, false)

	require.NoError(t, r.Flush())
	stored, err := g.StoredKey(idem.Request{Key: rawKey})
	require.NoError(t, err)
	assert.NotContains(t, out.String(), rawKey)
	assert.NotContains(t, out.String(), stored[strings.IndexByte(stored, '#')+1:])

	docs := documents(t, out.Bytes())
	require.Len(t, docs, 1)
	doc := docs[0]
	for name, want := range map[string]float64{
		emf.MetricClaims:            3,
		emf.MetricCompletions:       1,
		emf.MetricReplays:           1,
		emf.MetricPayloadMismatches: 1,
		emf.MetricReleases:          2, // the declined card, and k-3 whose handler returned the refusal
		emf.MetricInProgress:        1,
		emf.MetricStoreErrors:       1,
	} {
		assert.InDelta(t, want, doc[name], 0, name)
	}
	assert.NotContains(t, doc, emf.MetricLeaseLost, "nothing lost, nothing written")
	durations, ok2 := doc[emf.MetricHandlerDuration].([]any)
	require.True(t, ok2, "one duration per run: %v", doc[emf.MetricHandlerDuration])
	assert.Len(t, durations, 3, "completed, and released twice")
	assert.Equal(t, "orders", doc["Service"])
}

func TestHooksCountLostLeases(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := newRecorder(t, &out)
	store := storetest.NewFaulty(memstore.New())
	g, err := idem.New(store, "test", idem.WithHooks(r.Hooks()))
	require.NoError(t, err)
	store.Fail("complete", idem.ErrLeaseLost, false)
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 1, nil })
	require.ErrorIs(t, err, idem.ErrLeaseLost)
	require.NoError(t, r.Flush())
	docs := documents(t, out.Bytes())
	require.Len(t, docs, 1)
	assert.InDelta(t, 1.0, docs[0][emf.MetricLeaseLost], 0)
}

func sqsMessage(id, key, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId:      id,
		Body:           body,
		EventSource:    "aws:sqs",
		EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:credits",
		Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
		MessageAttributes: map[string]events.SQSMessageAttribute{
			sqs.KeyAttribute: {StringValue: &key, DataType: "String"},
		},
	}
}

// One SQS invocation through Lambda's handler machinery writes one document with the
// batch's outcomes by status and reason, and no message ID, key or body.
func TestWrapFlushesEachSQSInvocation(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := newRecorder(t, &out, emf.WithDimension("Service", "credits"))
	g, err := idem.New(memstore.New(), "test", idem.WithHooks(r.Hooks()))
	require.NoError(t, err)
	h, err := sqs.New(g, func(_ context.Context, m events.SQSMessage) error {
		if strings.Contains(m.Body, "frozen") {
			return errors.New("account frozen")
		}
		return nil
	}) // its batches report through the guard's hooks
	require.NoError(t, err)
	invoke := lambda.NewHandler(emf.Wrap(r, h.Handle))

	ev := events.SQSEvent{Records: []events.SQSMessage{
		sqsMessage("msg-1", rawKey+"-1", `{"account":"a"}`),
		sqsMessage("msg-2", rawKey+"-1", `{"account":"a"}`), // a duplicate in the batch
		sqsMessage("msg-3", rawKey+"-3", `{"account":"frozen"}`),
		sqsMessage("msg-4", rawKey+"-4", `not json, not a problem`),
	}}
	payload, err := json.Marshal(ev)
	require.NoError(t, err)
	for range 2 { // the second delivery replays what succeeded
		_, err = invoke.Invoke(context.Background(), payload)
		require.NoError(t, err)
	}

	for _, secret := range []string{rawKey, "msg-", "account"} {
		assert.NotContains(t, out.String(), secret)
	}
	docs := documents(t, out.Bytes())
	require.Len(t, docs, 2, "one document per invocation")
	want := []map[string]float64{
		{emf.MetricSQSBatches: 1, emf.MetricSQSMessages: 4, emf.MetricSQSRan: 2, emf.MetricSQSReplayed: 0,
			emf.MetricSQSDuplicates: 1, emf.MetricSQSFailed: 1, "SQSFailedHandler": 1, emf.MetricClaims: 3,
			emf.MetricCompletions: 2, emf.MetricReleases: 1},
		{emf.MetricSQSBatches: 1, emf.MetricSQSMessages: 4, emf.MetricSQSRan: 0, emf.MetricSQSReplayed: 2,
			emf.MetricSQSDuplicates: 1, emf.MetricSQSFailed: 1, "SQSFailedHandler": 1, emf.MetricClaims: 1,
			emf.MetricReplays: 2, emf.MetricReleases: 1},
	}
	for i, doc := range docs {
		for name, v := range want[i] {
			assert.InDelta(t, v, doc[name], 0, "invocation %d: %s", i+1, name)
		}
		assert.Contains(t, doc, emf.MetricSQSBatchDuration)
	}
}

// OnBatch counts the failures of each reason across the batch's items, and records the
// status counts even when they are zero.
func TestHooksRecordBatches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		event idem.BatchEvent
		want  map[string]float64
		none  []string // metrics not written
	}{
		{
			name: "failures of two reasons",
			event: idem.BatchEvent{
				Items: []idem.BatchItem{
					{ID: "m-1", Status: "failed", Reason: "in_progress", Err: idem.ErrInProgress},
					{ID: "m-2", Status: "ran"},
					{ID: "m-3", Status: "failed", Reason: "handler", Err: errors.New("frozen")},
					{ID: "m-4", Status: "failed", Reason: "in_progress", Err: idem.ErrInProgress},
				},
				Ran: 1, Failed: 3,
				Duration: 1500 * time.Microsecond,
			},
			want: map[string]float64{
				emf.MetricSQSBatches: 1, emf.MetricSQSMessages: 4, emf.MetricSQSRan: 1, emf.MetricSQSReplayed: 0,
				emf.MetricSQSDuplicates: 0, emf.MetricSQSFailed: 3, "SQSFailedInProgress": 2, "SQSFailedHandler": 1,
				emf.MetricSQSBatchDuration: 1.5,
			},
		},
		{
			name: "nothing failed",
			event: idem.BatchEvent{
				Items:    []idem.BatchItem{{ID: "m-1", Status: "replayed"}, {ID: "m-2", Status: "duplicate"}},
				Replayed: 1, Duplicates: 1,
			},
			want: map[string]float64{
				emf.MetricSQSBatches: 1, emf.MetricSQSMessages: 2, emf.MetricSQSRan: 0, emf.MetricSQSReplayed: 1,
				emf.MetricSQSDuplicates: 1, emf.MetricSQSFailed: 0, emf.MetricSQSBatchDuration: 0,
			},
			none: []string{"SQSFailedInProgress", "SQSFailedHandler"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			r := newRecorder(t, &out)
			r.Hooks().OnBatch(context.Background(), tc.event)
			require.NoError(t, r.Flush())
			docs := documents(t, out.Bytes())
			require.Len(t, docs, 1)
			for name, v := range tc.want {
				assert.InDelta(t, v, docs[0][name], 0, name)
			}
			for _, name := range tc.none {
				assert.NotContains(t, docs[0], name)
			}
			assert.NotContains(t, out.String(), "m-1", "no message ID")
		})
	}
}

func TestSQSFailedMetric(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reason sqs.Reason // as idem.BatchItem.Reason carries it, a string
		want   string
	}{
		{sqs.ReasonHandler, "SQSFailedHandler"},
		{sqs.ReasonInProgress, "SQSFailedInProgress"},
		{sqs.ReasonPayloadMismatch, "SQSFailedPayloadMismatch"},
		{sqs.ReasonLeaseLost, "SQSFailedLeaseLost"},
		{sqs.ReasonStore, "SQSFailedStore"},
		{sqs.ReasonNotStarted, "SQSFailedNotStarted"},
		{sqs.ReasonGroupStopped, "SQSFailedGroupStopped"},
		{sqs.ReasonDuplicateFailed, "SQSFailedDuplicateFailed"},
	}
	for _, tc := range tests {
		t.Run(string(tc.reason), func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, emf.SQSFailedMetric(string(tc.reason)))
		})
	}
}

func TestWrapFlushesWhenTheHandlerPanics(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := newRecorder(t, &out)
	fn := emf.Wrap(r, func(context.Context, string) (string, error) {
		_ = r.Count("Started", 1)
		panic("bug")
	})
	assert.Panics(t, func() { _, _ = fn(context.Background(), "x") })
	docs := documents(t, out.Bytes())
	require.Len(t, docs, 1)
	assert.InDelta(t, 1.0, docs[0]["Started"], 0)
}
