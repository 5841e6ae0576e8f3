package esmkinesis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/lab/kinesalite"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/kinesispub"
)

// TestReview15_OversizedRecordFailsItsCallMates: kinesispub cuts PutRecords calls at 500
// records and 5 MiB, and sends "a message larger than MaxBytes" alone; but Kinesis takes
// at most 1 MiB per record, and a record over it fails the whole call (a validation error
// of the request, not a per-record ErrorCode), so every other key's record of the call
// fails with it.
//
//  1. A relay publishes two keys' events at once: a's envelope is over 1 MiB (a payload a
//     PostgreSQL outbox takes), b's is small.
//  2. kinesispub puts both in one PutRecords (together well under 5 MiB).
//  3. Kinesis (kinesalite) refuses the request: b fails though nothing is wrong with it.
//     Each retry of the relay makes the same call, so b's key is stuck behind a's
//     poison event for as long as a is retried, and discarded with it where a relay
//     gives up.
//
// Severity: an event of another key not published (stuck key, lost where discarded);
// doc mismatch: the package says a record Kinesis answers with an error code fails
// alone, and pgoutbox's RelayOnce that a key whose oldest event the broker refuses
// "never keeps the other keys out": its pass takes the same oldest events each time, so
// the same call fails each time. (ddbrelay's events are DynamoDB items of at most
// 400 KB, so this needs a relay of another outbox, such as pgoutbox.)
func TestReview15_OversizedRecordFailsItsCallMates(t *testing.T) {
	t.Parallel()
	client := kinesalite.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	name := newStream(t, client, 1)
	big := []byte(`{"blob":"` + strings.Repeat("x", 1<<20) + `"}`)
	msgs := []outbox.Message{
		{ID: "ev-a", OutboxEvent: outbox.Event{Destination: name, OrderingKey: "acct-a", Type: "Paid", Payload: big}},
		{ID: "ev-b", OutboxEvent: outbox.Event{Destination: name, OrderingKey: "acct-b", Type: "Paid", Payload: []byte(`{"n":1}`)}},
	}
	errs := kinesispub.New(client).Publish(ctx, msgs)
	assert.Error(t, errs[0], "a's record is over Kinesis's 1 MiB")
	assert.NoError(t, errs[1], fmt.Sprintf("b's record has nothing wrong with it: %v", errs[1]))
}

// TestReview15_PartitionKeyOfAstralCharacters: kinesispub keeps an ordering key of at
// most 256 characters as the partition key, counting Unicode code points; Kinesis counts
// the key's length as Java (and kinesalite, in JavaScript) does, in UTF-16 code units,
// where a character outside the Basic Multilingual Plane (an emoji) counts two.
//
//  1. An event's ordering key is 200 emoji: 200 code points, kept as it is.
//  2. PutRecords refuses the request (a validation error of the whole call): the event
//     fails, and so does every other key's record in the call.
//  3. Each retry makes the same request: the key never gets through, and its call-mates
//     fail with it whenever they share a call.
//
// Severity: an event never published (its key stuck until the relay gives up, then
// discarded), other keys' events failed with it.
func TestReview15_PartitionKeyOfAstralCharacters(t *testing.T) {
	t.Parallel()
	client := kinesalite.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	name := newStream(t, client, 1)
	msgs := []outbox.Message{
		{ID: "ev-a", OutboxEvent: outbox.Event{Destination: name, OrderingKey: strings.Repeat("😀", 200), Type: "Paid", Payload: []byte(`{"n":1}`)}},
		{ID: "ev-b", OutboxEvent: outbox.Event{Destination: name, OrderingKey: "acct-b", Type: "Paid", Payload: []byte(`{"n":2}`)}},
	}
	errs := kinesispub.New(client).Publish(ctx, msgs)
	assert.NoError(t, errs[0], "an ordering key of 200 characters is a partition key Kinesis takes, or is hashed")
	assert.NoError(t, errs[1], "b's record has nothing wrong with it")
}
