package sqspub_test

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/awsjsontest"
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
	return answer(in), nil
}

// answer is SQS's answer to in: every entry listed, as successful unless its id is in
// failed (then InternalError). SQS lists every entry of a call in one list or the other.
func answer(in *sqs.SendMessageBatchInput, failed ...string) *sqs.SendMessageBatchOutput {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if slices.Contains(failed, aws.ToString(e.Id)) {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError")})
			continue
		}
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("sqs-" + aws.ToString(e.Id))})
	}
	return out
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
	f := &fakeSQS{answer: func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		return answer(in, "m1"), nil
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

// TestPublishWire runs the real SQS client against a fake endpoint of its JSON protocol:
// a FIFO entry carries its attributes, group and deduplication id on the wire, and an
// entry the answer lists in Failed fails alone, while the others (whose body checksums
// the client verifies) are published.
func TestPublishWire(t *testing.T) {
	t.Parallel()
	const fifo = "https://sqs.eu-west-1.amazonaws.com/1/orders.fifo"
	type wireEntry struct {
		Id, MessageBody, MessageGroupId, MessageDeduplicationId string
		MessageAttributes                                       map[string]struct{ DataType, StringValue string }
	}
	type wireCall struct {
		QueueUrl string
		Entries  []wireEntry
	}
	srv := awsjsontest.Start(t, "AmazonSQS.SendMessageBatch", func(body []byte) (any, error) {
		var in wireCall
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, err
		}
		var ok, failed []map[string]any
		for _, e := range in.Entries {
			if e.MessageAttributes[outbox.IDAttribute].StringValue == "id-1" {
				failed = append(failed, map[string]any{"Id": e.Id, "Code": "InternalError", "Message": "try again", "SenderFault": false})
				continue
			}
			sum := md5.Sum([]byte(e.MessageBody))
			ok = append(ok, map[string]any{"Id": e.Id, "MessageId": "sqs-" + e.Id, "MD5OfMessageBody": hex.EncodeToString(sum[:])})
		}
		return map[string]any{"Successful": ok, "Failed": failed}, nil
	})
	client := sqs.New(sqs.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1, Credentials: aws.AnonymousCredentials{}})
	errs := sqspub.New(client).Publish(context.Background(), []outbox.Message{msg(0, fifo), msg(1, fifo), msg(2, fifo)})
	assert.NoError(t, errs[0])
	assert.ErrorContains(t, errs[1], "InternalError")
	assert.NoError(t, errs[2])
	bodies := srv.Bodies()
	require.Len(t, bodies, 1)
	var call wireCall
	require.NoError(t, json.Unmarshal(bodies[0], &call))
	assert.Equal(t, fifo, call.QueueUrl)
	got := call.Entries
	require.Len(t, got, 3)
	assert.Equal(t, "m2", got[2].Id)
	assert.Equal(t, `{"n":2}`, got[2].MessageBody)
	assert.Equal(t, "acct-2", got[2].MessageGroupId)
	assert.Equal(t, "id-2", got[2].MessageDeduplicationId)
	assert.Equal(t, map[string]struct{ DataType, StringValue string }{
		outbox.IDAttribute:   {"String", "id-2"},
		sqspub.TypeAttribute: {"String", "Paid"},
		"tenant":             {"String", "t1"},
	}, got[2].MessageAttributes)
}

// TestFIFOGroupIDOfAnyOrderingKey: on a FIFO queue, an ordering key SQS takes as a message
// group id is the group; one it would refuse (a space, a non-ASCII letter) is sent as its
// SHA-256, the same for every event of the key.
func TestFIFOGroupIDOfAnyOrderingKey(t *testing.T) {
	t.Parallel()
	queue := "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"
	m := outbox.Message{OutboxEvent: outbox.Event{Destination: queue, OrderingKey: "acct-1", Type: "T"}, ID: "id-1"}
	assert.Equal(t, "acct-1", aws.ToString(sqspub.Entry("0", queue, m).MessageGroupId))
	m.OrderingKey = "kunde müller"
	sum := sha256.Sum256([]byte(m.OrderingKey))
	assert.Equal(t, "sha256-"+hex.EncodeToString(sum[:]), aws.ToString(sqspub.Entry("0", queue, m).MessageGroupId))
}
