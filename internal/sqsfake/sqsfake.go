// Package sqsfake is an SQS queue behind SendMessageBatch for the outbox end-to-end tests:
// it checks each request's shape as SQS would, delivers what it accepts to a queue a
// consumer drains, and injects faults by call number (a call refused whole, an entry
// refused alone, an answer lost after the messages were delivered). A FIFO queue (URL
// ending in ".fifo") requires a message group and deduplication id on every entry, and
// drops an entry whose deduplication id it took before, answering success, as SQS does
// within its five-minute deduplication interval.
package sqsfake

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Fault is what [Queue] does wrong on one SendMessageBatch call.
type Fault struct {
	// Refuse fails the whole call before anything is delivered.
	Refuse bool
	// FailFirstEntry refuses the call's first entry alone (InternalError).
	FailFirstEntry bool
	// LoseAnswer delivers the call's messages and returns an error: the answer was lost.
	LoseAnswer bool
}

// EveryNth is the fault schedule of the end-to-end tests: every 11th call from the 3rd
// refused, every 7th from the 5th with its first entry refused, every 5th from the 2nd
// with its answer lost.
func EveryNth(call int) Fault {
	return Fault{Refuse: call%11 == 3, FailFirstEntry: call%7 == 5, LoseAnswer: call%5 == 2}
}

// Queue is one SQS queue. Its methods are safe for concurrent use.
type Queue struct {
	t     testing.TB
	url   string
	arn   string
	fault func(call int) Fault

	mu                                sync.Mutex
	calls                             int
	queue, delivered                  []events.SQSMessage
	dedup                             map[string]bool
	refused, entryFailed, lostAnswers int
}

// New returns the queue at url (its ARN arn), failing tb on a request SQS would refuse,
// with the faults fault picks for each call (numbered from 1); nil injects none.
func New(tb testing.TB, url, arn string, fault func(call int) Fault) *Queue {
	if fault == nil {
		fault = func(int) Fault { return Fault{} }
	}
	return &Queue{t: tb, url: url, arn: arn, fault: fault, dedup: map[string]bool{}}
}

// FIFO reports whether the queue is a FIFO queue.
func (q *Queue) FIFO() bool { return strings.HasSuffix(q.url, ".fifo") }

var entryID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// SendMessageBatch takes a batch as SQS does, with the call's faults.
func (q *Queue) SendMessageBatch(_ context.Context, in *awssqs.SendMessageBatchInput, _ ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls++
	q.checkShape(in)
	f := q.fault(q.calls)
	if f.Refuse {
		q.refused++
		return nil, errors.New("fake SQS: ServiceUnavailable")
	}
	out := &awssqs.SendMessageBatchOutput{}
	for i, e := range in.Entries {
		if f.FailFirstEntry && i == 0 {
			q.entryFailed++
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), SenderFault: false})
			continue
		}
		id := fmt.Sprintf("sqs-%d-%d", q.calls, i)
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(id)})
		if q.FIFO() {
			if q.dedup[aws.ToString(e.MessageDeduplicationId)] {
				continue // accepted, not delivered again
			}
			q.dedup[aws.ToString(e.MessageDeduplicationId)] = true
		}
		attrs := map[string]events.SQSMessageAttribute{}
		for k, v := range e.MessageAttributes {
			attrs[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
		}
		m := events.SQSMessage{
			MessageId: id, Body: aws.ToString(e.MessageBody), MessageAttributes: attrs,
			EventSourceARN: q.arn, EventSource: "aws:sqs",
		}
		if q.FIFO() {
			m.Attributes = map[string]string{"MessageGroupId": aws.ToString(e.MessageGroupId), "MessageDeduplicationId": aws.ToString(e.MessageDeduplicationId)}
		}
		q.queue = append(q.queue, m)
		q.delivered = append(q.delivered, m)
	}
	if f.LoseAnswer {
		q.lostAnswers++
		return nil, errors.New("fake SQS: connection reset after the request was sent")
	}
	return out, nil
}

// checkShape reports what SQS would refuse in a request.
func (q *Queue) checkShape(in *awssqs.SendMessageBatchInput) {
	if aws.ToString(in.QueueUrl) != q.url {
		q.t.Errorf("SendMessageBatch to %q", aws.ToString(in.QueueUrl))
	}
	if n := len(in.Entries); n < 1 || n > 10 {
		q.t.Errorf("SendMessageBatch with %d entries", n)
	}
	ids := map[string]bool{}
	for _, e := range in.Entries {
		id := aws.ToString(e.Id)
		if !entryID.MatchString(id) || ids[id] {
			q.t.Errorf("entry id %q invalid or repeated", id)
		}
		ids[id] = true
		if aws.ToString(e.MessageBody) == "" {
			q.t.Errorf("entry %s: empty body", id)
		}
		if len(e.MessageAttributes) > 10 {
			q.t.Errorf("entry %s: %d message attributes", id, len(e.MessageAttributes))
		}
		for k, v := range e.MessageAttributes {
			if aws.ToString(v.DataType) != "String" || v.StringValue == nil {
				q.t.Errorf("entry %s: attribute %s is not a String", id, k)
			}
		}
		fifoFields := e.MessageGroupId != nil && e.MessageDeduplicationId != nil
		if q.FIFO() != fifoFields || (q.FIFO() && (aws.ToString(e.MessageGroupId) == "" || aws.ToString(e.MessageDeduplicationId) == "")) {
			q.t.Errorf("entry %s: message group and deduplication id on a FIFO queue only, and both (queue %s)", id, q.url)
		}
	}
}

// Take removes up to n messages from the queue, oldest first.
func (q *Queue) Take(n int) []events.SQSMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(n, len(q.queue))
	out := append([]events.SQSMessage(nil), q.queue[:n]...)
	q.queue = q.queue[n:]
	return out
}

// PutBack returns messages to the queue: a redelivery.
func (q *Queue) PutBack(msgs []events.SQSMessage) {
	q.mu.Lock()
	q.queue = append(q.queue, msgs...)
	q.mu.Unlock()
}

// Consume hands batches of up to 10 messages to h until ctx ends, and puts back those it
// reports failed (all of them when it returns an error): Lambda's SQS event source
// mapping, in short.
func (q *Queue) Consume(ctx context.Context, h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)) {
	for ctx.Err() == nil {
		batch := q.Take(10)
		if len(batch) == 0 {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		resp, err := h(ctx, events.SQSEvent{Records: batch})
		if err != nil {
			q.PutBack(batch)
			continue
		}
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		for _, m := range batch {
			if failed[m.MessageId] {
				q.PutBack([]events.SQSMessage{m})
			}
		}
	}
}

// Delivered returns every message the queue took, in order, redeliveries excluded.
func (q *Queue) Delivered() []events.SQSMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]events.SQSMessage(nil), q.delivered...)
}

// Stats counts the calls and the faults injected.
type Stats struct {
	Calls, Refused, EntriesFailed, LostAnswers int
}

// Stats returns the queue's counts so far.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return Stats{Calls: q.calls, Refused: q.refused, EntriesFailed: q.entryFailed, LostAnswers: q.lostAnswers}
}
