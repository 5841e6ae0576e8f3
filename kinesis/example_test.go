package kinesis_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/kinesis"
	"github.com/idemkit/idem/memstore"
)

// record returns a Kinesis record of partition key pk with JSON data.
func record(seq, pk, data string) events.KinesisEventRecord {
	return events.KinesisEventRecord{
		EventID: "shardId-000000000000:" + seq, EventSource: "aws:kinesis",
		Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: pk, Data: []byte(data)},
	}
}

// A consumer of a Kinesis stream: the records of a partition key run in order, and the
// first failure of each is reported by its sequence number.
func Example() {
	guard, _ := idem.New(memstore.New(), "apply-event") // dynamo.New(client, table) in production
	h, _ := kinesis.New(guard, func(ctx context.Context, r events.KinesisEventRecord) error {
		if string(r.Kinesis.Data) == `{"event_id":"e2"}` {
			return errors.New("downstream unavailable")
		}
		return nil // apply r.Kinesis.Data
	})
	resp, _ := h.Handle(context.Background(), events.KinesisEvent{Records: []events.KinesisEventRecord{
		record("101", "acct-1", `{"event_id":"e1"}`),
		record("102", "acct-1", `{"event_id":"e2"}`), // fails
		record("103", "acct-1", `{"event_id":"e3"}`), // not started: after acct-1's failure
		record("104", "acct-2", `{"event_id":"e4"}`),
	}})
	out, _ := json.Marshal(resp)
	fmt.Println(string(out))
	// Output:
	// {"batchItemFailures":[{"itemIdentifier":"102"}]}
}

// A producer that retried a PutRecord wrote one event twice, under two sequence numbers;
// a key from the data runs it once.
func ExampleWithKeyJMESPath() {
	guard, _ := idem.New(memstore.New(), "apply-event")
	runs := 0
	h, _ := kinesis.New(guard, func(context.Context, events.KinesisEventRecord) error {
		runs++
		return nil
	}, kinesis.WithKeyJMESPath("event_id"))
	rep, _ := h.Process(context.Background(), events.KinesisEvent{Records: []events.KinesisEventRecord{
		record("201", "acct-1", `{"event_id":"e7","amount":5}`),
		record("202", "acct-1", `{"event_id":"e7","amount":5}`), // the producer's retry
	}})
	fmt.Println(runs, rep.Outcomes[1].Status)
	// Output:
	// 1 duplicate
}
