package sqspub_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/sqspub"
)

// The SDK's client satisfies the publisher's interface.
var _ sqspub.API = (*sqs.Client)(nil)

// fakeSQS records the calls; answer decides each call's output.
type fakeSQS struct {
	calls  []*sqs.SendMessageBatchInput
	answer func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error)
}

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.calls = append(f.calls, in)
	if f.answer != nil {
		return f.answer(in)
	}
	return &sqs.SendMessageBatchOutput{}, nil
}

func msg(i int, queue string) outbox.Message {
	return outbox.Message{
		OutboxEvent: outbox.Event{Destination: queue, OrderingKey: fmt.Sprintf("acct-%d", i), Type: "Paid",
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Headers: map[string]string{"tenant": "t1"}},
		ID: fmt.Sprintf("id-%d", i),
	}
}

// TestPublishShapes: 12 messages to a FIFO queue and one to a standard queue go out as
// three calls (10 + 2 + 1), each message with its id, type and headers as String
// attributes; FIFO messages carry group = ordering key and deduplication id = event id.
func TestPublishShapes(t *testing.T) {
	t.Parallel()
	const fifo, std = "https://sqs.eu-west-1.amazonaws.com/1/orders.fifo", "https://sqs.eu-west-1.amazonaws.com/1/audit"
	var msgs []outbox.Message
	for i := range 12 {
		msgs = append(msgs, msg(i, fifo))
	}
	msgs = append(msgs, msg(12, std))
	msgs[12].Payload = nil
	f := &fakeSQS{}
	errs := sqspub.New(f).Publish(context.Background(), msgs)
	assert.Equal(t, make([]error, 13), errs)
	require.Len(t, f.calls, 3)
	assert.Len(t, f.calls[0].Entries, 10)
	assert.Len(t, f.calls[1].Entries, 2)
	assert.Equal(t, std, aws.ToString(f.calls[2].QueueUrl))

	e := f.calls[1].Entries[1] // msgs[11]
	assert.Equal(t, "m1", aws.ToString(e.Id))
	assert.Equal(t, `{"n":11}`, aws.ToString(e.MessageBody))
	assert.Equal(t, "acct-11", aws.ToString(e.MessageGroupId))
	assert.Equal(t, "id-11", aws.ToString(e.MessageDeduplicationId))
	assert.Equal(t, map[string]types.MessageAttributeValue{
		outbox.IDAttribute:   {DataType: aws.String("String"), StringValue: aws.String("id-11")},
		sqspub.TypeAttribute: {DataType: aws.String("String"), StringValue: aws.String("Paid")},
		"tenant":             {DataType: aws.String("String"), StringValue: aws.String("t1")},
	}, e.MessageAttributes)

	s := f.calls[2].Entries[0]
	assert.Nil(t, s.MessageGroupId, "a standard queue has no groups")
	assert.Nil(t, s.MessageDeduplicationId)
	assert.Equal(t, "{}", aws.ToString(s.MessageBody), "SQS refuses an empty body")
}

// TestPublishFailures: an entry SQS lists as failed fails alone; a call that fails (or
// whose answer was lost) fails all its messages.
func TestPublishFailures(t *testing.T) {
	t.Parallel()
	const q = "https://sqs.eu-west-1.amazonaws.com/1/orders"
	msgs := []outbox.Message{msg(0, q), msg(1, q), msg(2, q)}
	f := &fakeSQS{answer: func(*sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		return &sqs.SendMessageBatchOutput{Failed: []types.BatchResultErrorEntry{{Id: aws.String("m1"), Code: aws.String("InternalError")}}}, nil
	}}
	errs := sqspub.New(f).Publish(context.Background(), msgs)
	assert.NoError(t, errs[0])
	assert.Error(t, errs[1])
	assert.NoError(t, errs[2])

	lost := errors.New("connection reset")
	f.answer = func(*sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) { return nil, lost }
	for _, err := range sqspub.New(f).Publish(context.Background(), msgs) {
		assert.ErrorIs(t, err, lost)
	}
}
