package sqs_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

func TestDefaultKey(t *testing.T) {
	t.Parallel()
	str := func(v string) *string { return &v }
	tests := []struct {
		name    string
		attrs   map[string]events.SQSMessageAttribute
		system  map[string]string
		want    string
		wantErr error
	}{
		{name: "message ID", want: "m-1"},
		{
			name:   "FIFO deduplication ID",
			system: map[string]string{"MessageDeduplicationId": "dedup-9", "MessageGroupId": "g"},
			want:   "dedup-9",
		},
		{
			name:   "key attribute before the deduplication ID",
			attrs:  map[string]events.SQSMessageAttribute{sqs.KeyAttribute: {StringValue: str("order-7"), DataType: "String"}},
			system: map[string]string{"MessageDeduplicationId": "dedup-9"},
			want:   "order-7",
		},
		{
			name:  "numeric key attribute",
			attrs: map[string]events.SQSMessageAttribute{sqs.KeyAttribute: {StringValue: str("12345"), DataType: "Number"}},
			want:  "12345",
		},
		{
			name:    "binary key attribute",
			attrs:   map[string]events.SQSMessageAttribute{sqs.KeyAttribute: {BinaryValue: []byte("k"), DataType: "Binary"}},
			wantErr: idem.ErrInvalidKey,
		},
		{
			name:    "empty key attribute",
			attrs:   map[string]events.SQSMessageAttribute{sqs.KeyAttribute: {StringValue: str(""), DataType: "String"}},
			wantErr: idem.ErrMissingKey,
		},
		{
			name:  "other attributes are ignored",
			attrs: map[string]events.SQSMessageAttribute{"idempotency_key": {StringValue: str("other"), DataType: "String"}},
			want:  "m-1",
		},
		{
			name:  "key attribute in lower case, as copied from an HTTP API's headers",
			attrs: map[string]events.SQSMessageAttribute{"idempotency-key": {StringValue: str("lower"), DataType: "String"}},
			want:  "lower",
		},
		{
			name:   "key attribute in upper case, before the deduplication ID",
			attrs:  map[string]events.SQSMessageAttribute{"IDEMPOTENCY-KEY": {StringValue: str("upper"), DataType: "String"}},
			system: map[string]string{"MessageDeduplicationId": "dedup-9"},
			want:   "upper",
		},
		{
			name: "two spellings, one value",
			attrs: map[string]events.SQSMessageAttribute{
				sqs.KeyAttribute:  {StringValue: str("order-7"), DataType: "String"},
				"idempotency-key": {StringValue: str("order-7"), DataType: "String.custom"},
			},
			want: "order-7",
		},
		{
			name: "two spellings, two values",
			attrs: map[string]events.SQSMessageAttribute{
				sqs.KeyAttribute:  {StringValue: str("order-7"), DataType: "String"},
				"idempotency-key": {StringValue: str("order-8"), DataType: "String"},
			},
			wantErr: idem.ErrInvalidKey,
		},
		{
			name: "two spellings, one binary",
			attrs: map[string]events.SQSMessageAttribute{
				sqs.KeyAttribute:  {StringValue: str("order-7"), DataType: "String"},
				"IDEMPOTENCY-KEY": {BinaryValue: []byte("order-7"), DataType: "Binary"},
			},
			wantErr: idem.ErrInvalidKey,
		},
		{
			name:    "empty key attribute in lower case",
			attrs:   map[string]events.SQSMessageAttribute{"idempotency-key": {StringValue: str(""), DataType: "String"}},
			system:  map[string]string{"MessageDeduplicationId": "dedup-9"},
			wantErr: idem.ErrMissingKey,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key, err := sqs.DefaultKey(events.SQSMessage{MessageId: "m-1", Attributes: tc.system, MessageAttributes: tc.attrs})
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, key)
		})
	}
}

// TestKeyAttributeSpellings: the key attribute is read in any case, so a producer that
// copied the header name an HTTP API delivered (idempotency-key) still keys its sends, and
// two sends of one request run once; a message whose spellings carry different values is
// refused as a batch item failure rather than keyed by one of them or by its message ID.
func TestKeyAttributeSpellings(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ev := loadEvent(t, "sqs-standard-key-attribute-spellings")
		// 0 and 1: one request sent twice, keyed "idempotency-key"; 2: "IDEMPOTENCY-KEY";
		// 3: two spellings, two values; 4: two spellings, one value.
		resp := invoke(t, context.Background(), e.h, ev)
		adaptertest.Golden(t, "sqs-standard-key-attribute-spellings", resp)
		assert.Equal(t, pick(ev, 3), adaptertest.Failures(t, resp))
		assert.Equal(t, 1, e.rec.runsOf(pick(ev, 0, 1)...), "one request sent twice runs once")
		assert.Equal(t, 1, e.rec.runsOfKey("order-3001-credit"))
		assert.Equal(t, 1, e.rec.runsOfKey("order-3002-credit"))
		assert.Equal(t, 1, e.rec.runsOfKey("order-3004-credit"))
		assert.Zero(t, e.rec.runsOf(pick(ev, 3)...))
		assert.Equal(t, 3, e.rec.total())
		assert.Equal(t, 500+700, e.ledger.balance(t, "acc-9"), "credited once per request")

		o := e.reports.last(t).Outcomes[3]
		assert.Equal(t, sqs.ReasonKey, o.Reason)
		require.ErrorIs(t, o.Err, idem.ErrInvalidKey)
	})
}

// FuzzProcess feeds arbitrary events to a handler: it never panics, every record gets one
// outcome, and the response lists exactly the failed message IDs, once each.
func FuzzProcess(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "sqs-*.json"))
	require.NoError(f, err)
	for _, path := range seeds {
		if strings.HasSuffix(path, ".golden.json") {
			continue
		}
		raw, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var ev events.SQSEvent
		if json.Unmarshal(raw, &ev) != nil {
			return
		}
		guard, err := idem.New(memstore.New(), "test")
		require.NoError(t, err)
		rec := newRecorder()
		h, err := sqs.New(guard, rec.handle)
		require.NoError(t, err)

		rep, err := h.Process(context.Background(), ev)
		invalid := false
		for _, m := range ev.Records {
			invalid = invalid || m.MessageId == ""
		}
		if invalid {
			require.ErrorIs(t, err, sqs.ErrInvalidEvent)
			assert.Zero(t, rec.total())
			return
		}
		require.NoError(t, err)
		require.Len(t, rep.Outcomes, len(ev.Records))
		failed := map[string]bool{}
		for i, o := range rep.Outcomes {
			require.Equal(t, ev.Records[i].MessageId, o.MessageID)
			require.Contains(t, []sqs.Status{sqs.StatusRan, sqs.StatusReplayed, sqs.StatusDuplicate, sqs.StatusFailed}, o.Status)
			require.Equal(t, o.Failed(), o.Reason != "")
			require.Equal(t, o.Failed(), o.Err != nil)
			if o.Failed() {
				failed[o.MessageID] = true
			}
		}
		listed := map[string]bool{}
		for _, f := range rep.Response().BatchItemFailures {
			require.True(t, failed[f.ItemIdentifier], "only failed messages are listed")
			require.False(t, listed[f.ItemIdentifier], "each once")
			listed[f.ItemIdentifier] = true
		}
		require.Len(t, listed, len(failed))
	})
}
