// Package sqspub publishes outbox messages (package outbox) to Amazon SQS: an
// [outbox.Publisher] for the relays.
//
// Each message's Destination is a queue URL. The body is the payload ("{}" for an empty
// one: SQS refuses an empty body, and it must be text, as SQS takes it); the message
// attributes are [outbox.IDAttribute] (the event id, which package sqs takes as the
// idempotency key by default, so the consumer deduplicates without configuration),
// [TypeAttribute] (the event type) and the event's headers, all of data type String; a
// header never replaces the first two (outbox.Record refuses such names:
// outbox.ReservedHeader), and a header whose value is empty is left out (SQS refuses an
// empty attribute value; a consumer reads an absent header as empty). On a
// FIFO queue (URL ending in ".fifo") the message group is the ordering key and the
// deduplication id the event id. An ordering key SQS does not take as a group id (1 to
// 128 characters, each an ASCII letter, digit or punctuation mark: no space, no other
// letter) is sent as "sha256-" and its SHA-256 in hex, one group per key, so its order
// holds and SQS never refuses it.
//
// Messages go out with SendMessageBatch, up to 10 and 256 KiB per call (bodies and
// attributes, as SQS counts them), calls to distinct queues one after another, at most one
// message per ordering key in a call (see [Publisher.Publish]). SQS allows at most 10
// message attributes per message (so at most 8 headers) and 256 KiB per message; a
// message beyond these goes in a call of its own, is reported failed by SQS and stays in
// the outbox, blocking its ordering key, with SQS's error on its row.
package sqspub

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemkit/idem/internal/pubbatch"
	"github.com/idemkit/idem/outbox"
)

// TypeAttribute is the message attribute that carries the event's type
// ([outbox.TypeAttribute]).
const TypeAttribute = outbox.TypeAttribute

// SendMessageBatch's limits: entries per call, and bytes per call (bodies and attributes).
const (
	maxBatch = 10
	maxBytes = 256 * 1024
)

// stringType is the data type of every attribute the publisher sets.
const stringType = "String"

// API is the SQS client operation the publisher calls; a *sqs.Client has it.
type API interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// Publisher sends outbox messages to SQS. It is safe for concurrent use.
type Publisher struct {
	client API
	batch  pubbatch.Batcher
}

// New returns a Publisher sending through client.
func New(client API) *Publisher {
	p := &Publisher{client: client}
	p.batch = pubbatch.Batcher{Name: "sqspub", MaxEntries: maxBatch, MaxBytes: maxBytes, Size: size, Send: p.send}
	return p
}

// Publish implements [outbox.Publisher]: one SendMessageBatch per queue, 10 messages and
// 256 KiB (bodies and attributes, as SQS counts them; a longer call SQS refuses as a
// whole), with at most one message per ordering key in a call (a key's next message goes in a
// later call, once its previous one was sent). A call that fails fails its messages
// (including a call whose answer was lost: they are sent again, and the consumer
// deduplicates on the event id); a message SQS lists as failed fails alone, and its
// ordering key's later messages fail unsent. A message counts as sent only when SQS lists
// it as successful: one the answer omits fails so too, with an error wrapping
// pubbatch.ErrNoOutcome, and is sent again.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	return p.batch.Publish(ctx, msgs)
}

// send sends msgs to queue in one call.
func (p *Publisher) send(ctx context.Context, queue string, msgs []outbox.Message) ([]error, error) {
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(queue)}
	for n, m := range msgs {
		in.Entries = append(in.Entries, Entry(pubbatch.EntryID(n), queue, m))
	}
	out, err := p.client.SendMessageBatch(ctx, in)
	if err != nil {
		return nil, err
	}
	// An entry counts as sent only when SQS lists it as successful: one the answer omits
	// is sent again (the consumer deduplicates on the event id), never lost.
	errs := make([]error, len(msgs))
	for n := range errs {
		errs[n] = pubbatch.ErrNoOutcome
	}
	for _, s := range out.Successful {
		if n, ok := pubbatch.EntryIndex(aws.ToString(s.Id), len(msgs)); ok {
			errs[n] = nil
		}
	}
	for _, f := range out.Failed {
		if n, ok := pubbatch.EntryIndex(aws.ToString(f.Id), len(msgs)); ok {
			errs[n] = pubbatch.EntryError(f.Code, f.Message)
		}
	}
	return errs, nil
}

// Entry returns the SendMessageBatch entry for m with entry id id, as [Publisher] sends it
// to queue.
func Entry(id, queue string, m outbox.Message) types.SendMessageBatchRequestEntry {
	attrs := map[string]types.MessageAttributeValue{}
	for k, v := range pubbatch.Attributes(m, TypeAttribute) {
		attrs[k] = types.MessageAttributeValue{DataType: aws.String(stringType), StringValue: aws.String(v)}
	}
	e := types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(body(m)), MessageAttributes: attrs}
	if strings.HasSuffix(queue, ".fifo") {
		e.MessageGroupId = aws.String(pubbatch.GroupID(m.OrderingKey))
		e.MessageDeduplicationId = aws.String(m.ID)
	}
	return e
}

// body is m's message body: its payload, or "{}" for an empty one.
func body(m outbox.Message) string {
	if len(m.Payload) == 0 {
		return "{}"
	}
	return string(m.Payload)
}

// size is what m counts against SendMessageBatch's 256 KiB: the body, and each
// attribute's name, data type and value.
func size(m outbox.Message) int {
	n := len(body(m))
	for k, v := range pubbatch.Attributes(m, TypeAttribute) {
		n += len(k) + len(stringType) + len(v)
	}
	return n
}
