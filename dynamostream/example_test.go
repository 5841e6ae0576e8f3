package dynamostream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/memstore"
)

// change returns a MODIFY record of the orders table setting order's status.
func change(seq, order, status string) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{
		EventID: "ev-" + seq, EventName: "MODIFY", EventSource: "aws:dynamodb",
		Change: events.DynamoDBStreamRecord{
			SequenceNumber: seq,
			Keys:           map[string]events.DynamoDBAttributeValue{"order_id": events.NewStringAttribute(order)},
			NewImage: map[string]events.DynamoDBAttributeValue{
				"order_id": events.NewStringAttribute(order), "status": events.NewStringAttribute(status),
			},
		},
	}
}

// A consumer of a table's stream: the changes of an item run in order, and the first
// failure of each item is reported by its sequence number.
func Example() {
	guard, _ := idem.New(memstore.New(), "project-order") // dynamo.New(client, table) in production
	h, _ := dynamostream.New(guard, func(ctx context.Context, r events.DynamoDBEventRecord) error {
		if r.Change.NewImage["status"].String() == "PAID" {
			return errors.New("search index unavailable")
		}
		return nil // project r.Change.NewImage
	})
	resp, _ := h.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		change("301", "o-1", "NEW"),
		change("302", "o-1", "PAID"),    // fails
		change("303", "o-1", "SHIPPED"), // not started: after o-1's failure
		change("304", "o-2", "NEW"),
	}})
	out, _ := json.Marshal(resp)
	fmt.Println(string(out))
	// Output:
	// {"batchItemFailures":[{"itemIdentifier":"302"}]}
}

// Keys from the record decoded to plain JSON: here the order and its status, so each
// status of an order is applied once, whichever change carried it.
func ExampleWithKeyJMESPath() {
	guard, _ := idem.New(memstore.New(), "notify-status")
	h, _ := dynamostream.New(guard, func(context.Context, events.DynamoDBEventRecord) error {
		return nil // send the status notification
	}, dynamostream.WithKeyJMESPath("[Keys.order_id, NewImage.status]"))
	rep, _ := h.Process(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		change("401", "o-1", "PAID"),
	}})
	fmt.Println(rep.Outcomes[0].Key, rep.Outcomes[0].Status)
	// Output:
	// ["o-1","PAID"] ran
}
