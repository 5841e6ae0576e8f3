// Package snspub publishes outbox messages (package outbox) to Amazon SNS: an
// [outbox.Publisher] for the relays.
//
// Each message's Destination is a topic ARN. The message is the payload ("{}" for an
// empty one: SNS refuses an empty message); the message attributes are
// [outbox.IDAttribute] (the event id), [TypeAttribute] (the event type) and the event's
// headers, all of data type String; a header whose value is empty is left out (SNS
// refuses an empty attribute value; a consumer reads an absent header as empty). On a
// FIFO topic (ARN ending in ".fifo") the message group is the ordering key and the
// deduplication id the event id; an ordering key SNS does not take as a group id (1 to
// 128 characters, each an ASCII letter, digit or punctuation mark) is sent as "sha256-"
// and its SHA-256 in hex, one group per key.
//
// The consumer deduplicates on the event id. An SQS queue subscribed with raw message
// delivery (the subscription attribute RawMessageDelivery "true") receives the message
// attributes as SQS message attributes, so package sqs's default key is the event id and
// sqs.New deduplicates without configuration; without raw delivery the body is SNS's JSON
// envelope, whose MessageAttributes hold it (key with sqs.WithKeyJMESPath on
// "powertools_json(body).MessageAttributes.\"Idempotency-Key\".Value"). A Lambda function
// subscribed directly finds it in the record's Sns.MessageAttributes.
//
// Messages go out with PublishBatch, up to 10 and 256 KiB per call (message and
// attributes, as SNS counts them), calls to distinct topics one after another, at most
// one message per ordering key in a call (see [Publisher.Publish]). SNS allows at most 10
// message attributes per message (so at most 8 headers); a message beyond SNS's limits is
// reported failed by SNS and stays in the outbox, blocking its ordering key, with SNS's
// error on its row.
//
// See https://docs.aws.amazon.com/sns/latest/api/API_PublishBatch.html and
// https://docs.aws.amazon.com/sns/latest/dg/sns-large-payload-raw-message-delivery.html.
package snspub

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/idemkit/idem/internal/pubbatch"
	"github.com/idemkit/idem/outbox"
)

// TypeAttribute is the message attribute that carries the event's type
// ([outbox.TypeAttribute]).
const TypeAttribute = outbox.TypeAttribute

// PublishBatch's limits: entries per call, and bytes per call (messages and attributes).
const (
	maxBatch = 10
	maxBytes = 256 * 1024
)

// stringType is the data type of every attribute the publisher sets.
const stringType = "String"

// API is the SNS client operation the publisher calls; a *sns.Client has it.
type API interface {
	PublishBatch(ctx context.Context, in *sns.PublishBatchInput, optFns ...func(*sns.Options)) (*sns.PublishBatchOutput, error)
}

// Publisher sends outbox messages to SNS. It is safe for concurrent use.
type Publisher struct {
	client API
	batch  pubbatch.Batcher
}

// New returns a Publisher sending through client.
func New(client API) *Publisher {
	p := &Publisher{client: client}
	p.batch = pubbatch.Batcher{Name: "snspub", MaxEntries: maxBatch, MaxBytes: maxBytes, Size: size, Send: p.send}
	return p
}

// Publish implements [outbox.Publisher]: one PublishBatch per topic and 10 messages, with
// at most one message per ordering key in a call (a key's next message goes in a later
// call, once its previous one was sent). A call that fails fails its messages (including
// a call whose answer was lost: they are sent again, and the consumer deduplicates on the
// event id); a message SNS lists as failed fails alone, and its ordering key's later
// messages fail unsent.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	return p.batch.Publish(ctx, msgs)
}

// send publishes msgs to topic in one call.
func (p *Publisher) send(ctx context.Context, topic string, msgs []outbox.Message) ([]error, error) {
	in := &sns.PublishBatchInput{TopicArn: aws.String(topic)}
	for n, m := range msgs {
		in.PublishBatchRequestEntries = append(in.PublishBatchRequestEntries, Entry(pubbatch.EntryID(n), topic, m))
	}
	out, err := p.client.PublishBatch(ctx, in)
	if err != nil {
		return nil, err
	}
	// An entry counts as published only when SNS lists it as successful.
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

// Entry returns the PublishBatch entry for m with entry id id, as [Publisher] sends it to
// topic.
func Entry(id, topic string, m outbox.Message) types.PublishBatchRequestEntry {
	attrs := map[string]types.MessageAttributeValue{}
	for k, v := range pubbatch.Attributes(m, TypeAttribute) {
		attrs[k] = types.MessageAttributeValue{DataType: aws.String(stringType), StringValue: aws.String(v)}
	}
	e := types.PublishBatchRequestEntry{Id: aws.String(id), Message: aws.String(body(m)), MessageAttributes: attrs}
	if strings.HasSuffix(topic, ".fifo") {
		e.MessageGroupId = aws.String(pubbatch.GroupID(m.OrderingKey))
		e.MessageDeduplicationId = aws.String(m.ID)
	}
	return e
}

// body is m's message: its payload, or "{}" for an empty one.
func body(m outbox.Message) string {
	if len(m.Payload) == 0 {
		return "{}"
	}
	return string(m.Payload)
}

// size is what m counts against PublishBatch's 256 KiB: the message, and each attribute's
// name, data type and value.
func size(m outbox.Message) int {
	n := len(body(m))
	for k, v := range pubbatch.Attributes(m, TypeAttribute) {
		n += len(k) + len(stringType) + len(v)
	}
	return n
}
