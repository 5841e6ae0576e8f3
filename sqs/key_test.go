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
			attrs: map[string]events.SQSMessageAttribute{"idempotency-key": {StringValue: str("lower"), DataType: "String"}},
			want:  "m-1",
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
		guard, err := idem.New(idem.NewMemStore(), "test")
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
