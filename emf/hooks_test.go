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
		emf.MetricClaims:             3,
		emf.MetricCompletions:        1,
		emf.MetricReplays:            1,
		emf.MetricPayloadMismatches:  1,
		emf.MetricHandlerFailures:    2, // the declined card, and k-3 whose handler returned the refusal
		emf.MetricInProgressRefusals: 1,
		emf.MetricStoreErrors:        1,
	} {
		assert.InDelta(t, want, doc[name], 0, name)
	}
	assert.NotContains(t, doc, emf.MetricLeaseLost, "nothing lost, nothing written")
	assert.NotContains(t, doc, emf.MetricOtherReleases, "every release followed a handler's failure")
	for _, name := range []string{emf.MetricHandlerDuration, emf.MetricRunDuration} {
		durations, ok := doc[name].([]any)
		require.True(t, ok, "%s: one duration per run: %v", name, doc[name])
		assert.Len(t, durations, 3, "%s: completed, and released twice", name)
	}
	assert.Equal(t, "orders", doc["Service"])
	assert.Equal(t, "test", doc["Operation"], "the guard's operation")
}

// Two guards in one function share the recorder: their metrics are apart, under the
// Operation dimension beside Service; a batch's metrics, which belong to no one
// operation, carry Service only.
func TestHooksDimensionEachOperation(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := newRecorder(t, &out, emf.WithDimension("Service", "orders"))
	ctx := context.Background()
	for _, op := range []string{"create-order", "cancel-order"} {
		g, err := idem.New(memstore.New(), op, idem.WithScope("orders-api"), idem.WithHooks(r.Hooks()))
		require.NoError(t, err)
		_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 1, nil })
		require.NoError(t, err)
	}
	_, _, err := idem.Do(ctx, mustGuard(t, "create-order", r), idem.Request{Key: "k2"}, func(context.Context) (int, error) { return 1, nil })
	require.NoError(t, err)
	r.Hooks().OnBatch(ctx, idem.BatchEvent{Items: []idem.BatchItem{{ID: "m-1", Status: "ran"}}, Ran: 1})
	require.NoError(t, r.Flush())

	docs := documents(t, out.Bytes())
	require.Len(t, docs, 2, "one document per operation; the batch's metrics join the first")
	byOp := map[string]map[string]any{}
	for _, doc := range docs {
		op, _ := doc["Operation"].(string)
		byOp[op] = doc
	}
	assert.Equal(t, [][]string{{"Service", "Operation"}, {"Service"}}, dimensionSets(t, byOp["create-order"]))
	assert.Equal(t, [][]string{{"Service", "Operation"}}, dimensionSets(t, byOp["cancel-order"]))
	assert.InDelta(t, 2, byOp["create-order"][emf.MetricClaims], 0)
	assert.InDelta(t, 1, byOp["cancel-order"][emf.MetricClaims], 0)
	assert.InDelta(t, 1, byOp["create-order"][emf.MetricSQSBatches], 0)
	assert.NotContains(t, byOp["cancel-order"], emf.MetricSQSBatches)
}

// dimensionSets returns the dimension set of each directive of doc.
func dimensionSets(t *testing.T, doc map[string]any) [][]string {
	t.Helper()
	b, err := json.Marshal(doc["_aws"])
	require.NoError(t, err)
	var meta struct {
		CloudWatchMetrics []struct{ Dimensions [][]string }
	}
	require.NoError(t, json.Unmarshal(b, &meta))
	var sets [][]string
	for _, d := range meta.CloudWatchMetrics {
		require.Len(t, d.Dimensions, 1)
		sets = append(sets, d.Dimensions[0])
	}
	return sets
}

func mustGuard(t *testing.T, op string, r *emf.Recorder) *idem.Guard {
	t.Helper()
	g, err := idem.New(memstore.New(), op, idem.WithScope("orders-api"), idem.WithHooks(r.Hooks()))
	require.NoError(t, err)
	return g
}

// A completion that committed nothing (an attached write refused) releases the key
// without the handler failing: OtherReleases, not HandlerFailures.
func TestHooksTellHandlerFailuresFromOtherReleases(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := newRecorder(t, &out)
	g, err := idem.New(memstore.New(), "test", idem.WithHooks(r.Hooks()))
	require.NoError(t, err)
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
		return 1, idem.Attach(ctx, func() error { return idem.ErrConditionFailed })
	})
	require.ErrorIs(t, err, idem.ErrConditionFailed)
	require.NoError(t, r.Flush())
	docs := documents(t, out.Bytes())
	require.Len(t, docs, 1)
	assert.InDelta(t, 1, docs[0][emf.MetricOtherReleases], 0)
	assert.NotContains(t, docs[0], emf.MetricHandlerFailures)
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
	for _, doc := range docs {
		assert.Equal(t, "test", doc["Operation"])
		assert.Equal(t, [][]string{{"Service", "Operation"}, {"Service"}}, dimensionSets(t, doc),
			"the guard's metrics by operation, the batch's (which belongs to no one operation) without")
	}
	want := []map[string]float64{
		{emf.MetricSQSBatches: 1, emf.MetricSQSMessages: 4, emf.MetricSQSRan: 2, emf.MetricSQSReplayed: 0,
			emf.MetricSQSDuplicates: 1, emf.MetricSQSFailed: 1, "SQSFailedHandler": 1, emf.MetricClaims: 3,
			emf.MetricCompletions: 2, emf.MetricHandlerFailures: 1},
		{emf.MetricSQSBatches: 1, emf.MetricSQSMessages: 4, emf.MetricSQSRan: 0, emf.MetricSQSReplayed: 2,
			emf.MetricSQSDuplicates: 1, emf.MetricSQSFailed: 1, "SQSFailedHandler": 1, emf.MetricClaims: 1,
			emf.MetricReplays: 2, emf.MetricHandlerFailures: 1},
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

// A recorder given its own Operation dimension keeps it: the hooks add none.
func TestHooksKeepAnOperationDimensionGiven(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := newRecorder(t, &out, emf.WithDimension(emf.DimensionOperation, "all"))
	g := mustGuard(t, "create-order", r)
	_, _, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 1, nil })
	require.NoError(t, err)
	require.NoError(t, r.Flush())
	docs := documents(t, out.Bytes())
	require.Len(t, docs, 1)
	assert.Equal(t, "all", docs[0][emf.DimensionOperation])
}

// A metric of no operation whose name a guard's metric has too keeps a document of its
// own: one document has one value per name.
func TestFlushKeepsClashingNamesApart(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := newRecorder(t, &out)
	g := mustGuard(t, "create-order", r)
	_, _, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 1, nil })
	require.NoError(t, err)
	require.NoError(t, r.Count(emf.MetricClaims, 5))
	require.NoError(t, r.Flush())
	docs := documents(t, out.Bytes())
	require.Len(t, docs, 2)
	assert.InDelta(t, 1, docs[0][emf.MetricClaims], 0)
	assert.Equal(t, "create-order", docs[0]["Operation"])
	assert.InDelta(t, 5, docs[1][emf.MetricClaims], 0)
	assert.NotContains(t, docs[1], "Operation")
}

// A replay from the guard's local cache counts as a replay, and as a cache replay.
func TestHooksCountCacheReplays(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := newRecorder(t, &out)
	g, err := idem.New(memstore.New(), "test", idem.WithCache(10), idem.WithHooks(r.Hooks()))
	require.NoError(t, err)
	for range 3 {
		_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 1, nil })
		require.NoError(t, err)
	}
	require.NoError(t, r.Flush())
	docs := documents(t, out.Bytes())
	require.Len(t, docs, 1)
	assert.InDelta(t, 2, docs[0][emf.MetricReplays], 0)
	assert.InDelta(t, 2, docs[0][emf.MetricCacheReplays], 0, "the completion filled the cache")
}

// A run whose lease the watchdog found run out, and whose completion then met the new
// owner's record, is one incident: LeaseLost counts it once.
func TestHooksCountALostLeaseOnce(t *testing.T) {
	t.Parallel()
	const margin = 2 * time.Second
	var out bytes.Buffer
	r := newRecorder(t, &out)
	clock := storetest.NewSimulatedClock()
	g, err := idem.New(memstore.New(), "test", idem.WithClock(clock), idem.WithLease(time.Minute),
		idem.WithLeaseMargin(margin), idem.WithHooks(r.Hooks()))
	require.NoError(t, err)
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(hctx context.Context) (int, error) {
		wait, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.True(t, clock.WaitAfterCalls(wait, 1), "the lease watchdog does not wait on the clock")
		require.True(t, clock.AdvanceToNext(wait), "the lease watchdog set no timer")
		<-hctx.Done()
		clock.Advance(margin + time.Second) // the lease ended: another caller takes the key over
		_, _, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 2, nil })
		require.NoError(t, err)
		return 1, nil // its completion meets the other owner's record
	})
	require.ErrorIs(t, err, idem.ErrLeaseLost)
	require.NoError(t, r.Flush())
	docs := documents(t, out.Bytes())
	require.Len(t, docs, 1)
	assert.InDelta(t, 1.0, docs[0][emf.MetricLeaseLost], 0, "one incident, one count")
}
