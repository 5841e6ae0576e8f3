package esm_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem/internal/esm"
)

// oneShard is a closed stream of one shard in memory: tests read DynamoDB Local
// ([esm.NewDynamoDBStream]) or Kinesis instead.
type oneShard []esm.Record

func (s oneShard) Shards(context.Context) ([]esm.Shard, error) {
	return []esm.Shard{{ID: "shardId-1"}}, nil
}

func (s oneShard) Read(_ context.Context, _, after string, limit int) ([]esm.Record, bool, error) {
	var out []esm.Record
	for _, r := range s {
		if (after == "" || esm.SequenceLess(after, r.SequenceNumber)) && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, true, nil
}

// A handler that stops at its first failure and reports it: the event source mapping
// checkpoints before that record and delivers the stream again from it.
func Example() {
	var stream oneShard
	for i, id := range []string{"a", "b", "c", "d"} {
		seq := fmt.Sprint(100 + i)
		ev, _ := json.Marshal(events.DynamoDBEventRecord{
			EventID: id, EventName: "INSERT", EventSource: "aws:dynamodb",
			Change: events.DynamoDBStreamRecord{SequenceNumber: seq},
		})
		stream = append(stream, esm.Record{SequenceNumber: seq, Event: ev})
	}
	failed := false
	handler := func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		var resp events.DynamoDBEventResponse
		for _, r := range ev.Records {
			if r.EventID == "c" && !failed {
				failed = true
				resp.BatchItemFailures = append(resp.BatchItemFailures,
					events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
				break // stop at the first failure: the records after it come again
			}
		}
		return resp, nil
	}
	p, err := esm.New(stream, handler, esm.WithReportBatchItemFailures())
	if err != nil {
		fmt.Println(err)
		return
	}
	report, err := p.Drain(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, inv := range report.Invocations {
		fmt.Println(inv.Records, inv.Outcome, "checkpoint", inv.Checkpoint)
	}
	fmt.Println("check:", report.Check())
	// Output:
	// [100 101 102 103] PartialFailure checkpoint 101
	// [102 103] Success checkpoint 103
	// check: <nil>
}
