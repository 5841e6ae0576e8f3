package sqspub_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/sqspub"
)

// sqsBatchLimit is SendMessageBatch's limit on a call's messages together, as this
// package's documentation states it ("256 KiB per call"): SQS fails a longer call as a
// whole (AWS.SimpleQueueService.BatchRequestTooLong).
const sqsBatchLimit = 256 * 1024

// TestReview15_CallOverTheBatchLimit: ten messages of ten ordering keys, each 120 KiB
// (well within SQS's limit for one message), to one queue. SQS refuses a SendMessageBatch
// whose messages come to more than its limit as a whole; snspub, ebpub and kinesispub
// cut calls at their broker's byte limit (pubbatch.Batcher.MaxBytes), sqspub does not.
//
//  1. Publish puts the ten messages in one call (1.2 MB).
//  2. SQS answers BatchRequestTooLong: every message fails, none of them for anything of
//     its own.
//  3. The relay reports all ten keys failed; the next attempt with the same messages makes
//     the same call. A polling relay that hands the same pending rows each time never
//     gets past them; on ddbrelay the group call's makeup depends on timing, and when it
//     repeats the retries run out (MaximumRetryAttempts) and the events go to the
//     on-failure destination.
//
// Severity: lost events (discarded after the retries) / every key of the call stuck;
// doc mismatch: the package says a message beyond SQS's limits is reported failed and
// blocks its own ordering key, not that a call of valid messages fails as a whole.
func TestReview15_CallOverTheBatchLimit(t *testing.T) {
	t.Parallel()
	f := &fakeSQS{answer: func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		total := 0
		for _, e := range in.Entries {
			total += len(aws.ToString(e.MessageBody))
			for k, v := range e.MessageAttributes {
				total += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue))
			}
		}
		if total > sqsBatchLimit {
			return nil, errors.New("api error AWS.SimpleQueueService.BatchRequestTooLong: Batch requests cannot be longer than 262144 bytes")
		}
		return answer(in), nil
	}}
	p := sqspub.New(f)
	var msgs []outbox.Message
	for i := range 10 {
		msgs = append(msgs, outbox.Message{
			OutboxEvent: outbox.Event{Destination: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders",
				OrderingKey: fmt.Sprintf("acct-%d", i), Type: "Paid",
				Payload: []byte(`{"blob":"` + strings.Repeat("x", 120*1024) + `"}`)},
			ID: fmt.Sprintf("id-%d", i),
		})
	}
	errs := p.Publish(context.Background(), msgs)
	for i, err := range errs {
		assert.NoError(t, err, "message %d: every message is within SQS's limits", i)
	}
	t.Logf("calls: %d", len(f.calls))
}

// TestReview15_EmptyHeaderValue: outbox.Record takes a header whose value is empty, and
// the stores keep it (ddbrelay's TestReview15_InsertDecodesAsRecorded reads one back from
// DynamoDB's stream); sqspub sends it as a String message attribute with an empty value.
// SQS's MessageAttributeValue reference: "Name, type, value and the message body must not
// be empty or null", so SQS refuses the entry, on every attempt.
//
//  1. A handler records an event with Headers{"note": ""} (an optional field mapped to a
//     header, left empty); Record accepts it and the run commits.
//  2. The relay publishes it: SQS fails the entry (InvalidParameterValue). The relay
//     stops its key; every retry fails the same way; after MaximumRetryAttempts the
//     record is discarded (ddbrelay) or the key is stuck for good (pgoutbox).
//
// Severity: lost event (never published) and a stuck ordering key. Passing means Record
// refuses the header (outbox.ErrInvalidEvent), or the entry SQS gets has no empty value.
func TestReview15_EmptyHeaderValue(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	g, err := idem.New(store, "r15-header")
	require.NoError(t, err)
	var recErr error
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (string, error) {
		_, recErr = outbox.Record(ctx, outbox.Event{Destination: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders",
			OrderingKey: "acct-1", Type: "OrderPlaced", Payload: []byte(`{}`), Headers: map[string]string{"note": ""}})
		return "ok", nil
	})
	require.NoError(t, err)
	if recErr != nil {
		assert.ErrorIs(t, recErr, outbox.ErrInvalidEvent)
		return
	}
	msgs := store.Outbox()
	require.Len(t, msgs, 1)
	f := &fakeSQS{answer: func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		out := &sqs.SendMessageBatchOutput{}
		for _, e := range in.Entries {
			ok := true
			for k, v := range e.MessageAttributes {
				if k == "" || aws.ToString(v.DataType) == "" || aws.ToString(v.StringValue) == "" {
					ok = false
				}
			}
			if ok {
				out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("sqs-" + aws.ToString(e.Id))})
			} else {
				out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"),
					Message: aws.String("Message (user) attribute must contain a non-empty value of type 'String'."), SenderFault: true})
			}
		}
		return out, nil
	}}
	errs := sqspub.New(f).Publish(context.Background(), msgs)
	assert.NoError(t, errs[0], "an event Record took is one SQS takes")
}
