// Package sqspub publishes outbox messages (package outbox) to Amazon SQS: an
// [outbox.Publisher] for the relays.
//
// Each message's Destination is a queue URL. The body is the payload ("{}" for an empty
// one: SQS refuses an empty body, and it must be text, as SQS takes it); the message
// attributes are [outbox.IDAttribute] (the event id, which package sqs takes as the
// idempotency key by default, so the consumer deduplicates without configuration),
// [TypeAttribute] (the event type) and the event's headers, all of data type String; a
// header never replaces the first two (outbox.Record refuses such names:
// outbox.ReservedHeader). On a
// FIFO queue (URL ending in ".fifo") the message group is the ordering key and the
// deduplication id the event id.
//
// Messages go out with SendMessageBatch, up to 10 per call, calls to distinct queues one
// after another. SQS allows at most 10 message attributes per message (so at most 8
// headers) and 256 KiB per call; a message beyond these is reported failed by SQS and
// stays in the outbox, blocking its ordering key, with SQS's error on its row.
package sqspub

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemkit/idem/outbox"
)

// TypeAttribute is the message attribute that carries the event's type
// ([outbox.TypeAttribute]).
const TypeAttribute = outbox.TypeAttribute

// maxBatch is SendMessageBatch's limit of entries per call.
const maxBatch = 10

// API is the SQS client operation the publisher calls; a *sqs.Client has it.
type API interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// Publisher sends outbox messages to SQS. It is safe for concurrent use.
type Publisher struct {
	client API
}

// New returns a Publisher sending through client.
func New(client API) *Publisher { return &Publisher{client: client} }

// Publish implements [outbox.Publisher]: one SendMessageBatch per queue and 10 messages.
// A call that fails fails its messages (including a call whose answer was lost: they are
// sent again, and the consumer deduplicates on the event id); a message SQS lists as
// failed fails alone.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	byQueue := map[string][]int{}
	var queues []string
	for i, m := range msgs {
		if _, ok := byQueue[m.Destination]; !ok {
			queues = append(queues, m.Destination)
		}
		byQueue[m.Destination] = append(byQueue[m.Destination], i)
	}
	for _, q := range queues {
		idx := byQueue[q]
		for len(idx) > 0 {
			n := min(len(idx), maxBatch)
			p.send(ctx, q, msgs, idx[:n], errs)
			idx = idx[n:]
		}
	}
	return errs
}

// send sends msgs[idx] to queue in one call, setting errs of those that failed.
func (p *Publisher) send(ctx context.Context, queue string, msgs []outbox.Message, idx []int, errs []error) {
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(queue)}
	byEntry := map[string]int{}
	for n, i := range idx {
		id := "m" + strconv.Itoa(n)
		byEntry[id] = i
		in.Entries = append(in.Entries, Entry(id, queue, msgs[i]))
	}
	out, err := p.client.SendMessageBatch(ctx, in)
	if err != nil {
		for _, i := range idx {
			errs[i] = fmt.Errorf("sqspub: send to %s: %w", queue, err)
		}
		return
	}
	for _, f := range out.Failed {
		if i, ok := byEntry[aws.ToString(f.Id)]; ok {
			errs[i] = fmt.Errorf("sqspub: send to %s: %s: %s", queue, aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
}

// Entry returns the SendMessageBatch entry for m with entry id id, as [Publisher] sends it
// to queue.
func Entry(id, queue string, m outbox.Message) types.SendMessageBatchRequestEntry {
	body := string(m.Payload)
	if body == "" {
		body = "{}"
	}
	attrs := make(map[string]types.MessageAttributeValue, len(m.Headers)+2)
	for k, v := range m.Headers {
		attrs[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	// Set after the headers: outbox.Record refuses a header of these names, and no stored
	// header replaces them.
	attrs[outbox.IDAttribute] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(m.ID)}
	attrs[TypeAttribute] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(m.Type)}
	e := types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(body), MessageAttributes: attrs}
	if strings.HasSuffix(queue, ".fifo") {
		e.MessageGroupId = aws.String(m.OrderingKey)
		e.MessageDeduplicationId = aws.String(m.ID)
	}
	return e
}
