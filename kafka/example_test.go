package kafka_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/kafka"
	"github.com/idemkit/idem/memstore"
)

// record returns a Kafka record of topic "credits" as Lambda sends it: key and value in
// base64, and the idempotency-key header its producer set.
func record(partition, offset int64, key, eventID string) events.KafkaRecord {
	b64 := base64.StdEncoding.EncodeToString
	return events.KafkaRecord{
		Topic: "credits", Partition: partition, Offset: offset,
		Key: b64([]byte(key)), Value: b64([]byte(`{"event_id":"` + eventID + `"}`)),
		Headers: []map[string]events.JSONNumberBytes{{"idempotency-key": []byte(eventID)}},
	}
}

// A consumer of an MSK topic in provisioned mode with ReportBatchItemFailures: the records
// of a record key run in offset order and stop at its first failure; the failure and the
// records not started after it are reported by partition and offset.
func Example() {
	guard, _ := idem.New(memstore.New(), "apply-credit") // dynamo.New(client, table) in production
	h, _ := kafka.New(guard, func(ctx context.Context, r events.KafkaRecord) error {
		value, err := kafka.Value(r)
		if err != nil {
			return err
		}
		if string(value) == `{"event_id":"e2"}` {
			return errors.New("downstream unavailable")
		}
		return nil // apply value
	}, kafka.WithReportBatchItemFailures(true))
	resp, _ := h.Handle(context.Background(), events.KafkaEvent{Records: map[string][]events.KafkaRecord{
		"credits-0": {
			record(0, 10, "acct-1", "e1"),
			record(0, 11, "acct-1", "e2"), // fails
			record(0, 12, "acct-1", "e3"), // not started: after acct-1's failure
			record(0, 13, "acct-2", "e4"),
		},
	}})
	out, _ := json.Marshal(resp)
	fmt.Println(string(out))
	// Output:
	// {"batchItemFailures":[{"itemIdentifier":{"partition":"credits-0","offset":11}},{"itemIdentifier":{"partition":"credits-0","offset":12}}]}
}

// Outside provisioned mode Kafka takes no partial response: the batch fails, after every
// record that finished is recorded, and Lambda's retry replays those.
func ExampleHandler_Handle() {
	guard, _ := idem.New(memstore.New(), "apply-credit")
	fail, runs := true, 0
	h, _ := kafka.New(guard, func(_ context.Context, r events.KafkaRecord) error {
		if r.Offset == 21 && fail {
			return errors.New("downstream unavailable")
		}
		runs++
		return nil
	}, kafka.WithConcurrency(1))
	ev := events.KafkaEvent{Records: map[string][]events.KafkaRecord{
		"credits-0": {record(0, 20, "acct-1", "e7"), record(0, 21, "acct-1", "e8")},
	}}
	_, err := h.Handle(context.Background(), ev)
	fmt.Println(errors.Is(err, kafka.ErrBatchFailed), runs)
	fail = false
	_, err = h.Handle(context.Background(), ev) // Lambda retries the whole batch
	fmt.Println(err, runs)
	// Output:
	// true 1
	// <nil> 2
}
