package batch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/kinesis"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// TestEveryAdapter runs one batch through each adapter on the engine: four records, the
// first three of one ordering group (SQS FIFO message group, Kinesis partition key,
// DynamoDB item), the second failing. Ordered sources never run the third record: streams
// report the failure alone (Lambda retries the shard from it), SQS FIFO every message not
// done; SQS standard queues run every message and report the failed one. A redelivery of
// the same batch replays what finished and runs the rest.
func TestEveryAdapter(t *testing.T) {
	t.Parallel()
	type run func(t *testing.T, g *idem.Guard, fail string, ran func(string)) (reported []string)
	ids := []string{"1", "2", "3", "4"}
	group := []string{"a", "a", "a", "b"}
	adapters := []struct {
		name     string
		ordered  bool
		reported []string // the first run's response
		run      run
	}{
		{"sqs standard", false, []string{"2"}, func(t *testing.T, g *idem.Guard, fail string, ran func(string)) []string {
			return runSQS(t, g, fail, ran, "arn:aws:sqs:eu-west-1:123456789012:q", ids, group)
		}},
		{"sqs fifo", true, []string{"2", "3"}, func(t *testing.T, g *idem.Guard, fail string, ran func(string)) []string {
			return runSQS(t, g, fail, ran, "arn:aws:sqs:eu-west-1:123456789012:q.fifo", ids, group)
		}},
		{"kinesis", true, []string{"2"}, func(t *testing.T, g *idem.Guard, fail string, ran func(string)) []string {
			h, err := kinesis.New(g, func(_ context.Context, r events.KinesisEventRecord) error {
				return countRecord(r.Kinesis.SequenceNumber, fail, ran)
			}, kinesis.WithConcurrency(1))
			require.NoError(t, err)
			var ev events.KinesisEvent
			for i, id := range ids {
				ev.Records = append(ev.Records, events.KinesisEventRecord{EventID: "shardId-0:" + id,
					Kinesis: events.KinesisRecord{SequenceNumber: id, PartitionKey: group[i], Data: []byte(id)}})
			}
			resp, err := h.Handle(testContext(t), ev)
			require.NoError(t, err)
			var out []string
			for _, f := range resp.BatchItemFailures {
				out = append(out, f.ItemIdentifier)
			}
			return out
		}},
		{"dynamostream", true, []string{"2"}, func(t *testing.T, g *idem.Guard, fail string, ran func(string)) []string {
			h, err := dynamostream.New(g, func(_ context.Context, r events.DynamoDBEventRecord) error {
				return countRecord(r.Change.SequenceNumber, fail, ran)
			}, dynamostream.WithConcurrency(1))
			require.NoError(t, err)
			var ev events.DynamoDBEvent
			for i, id := range ids {
				ev.Records = append(ev.Records, events.DynamoDBEventRecord{EventID: "ev-" + id, EventName: "MODIFY",
					Change: events.DynamoDBStreamRecord{SequenceNumber: id,
						Keys: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(group[i])}}})
			}
			resp, err := h.Handle(testContext(t), ev)
			require.NoError(t, err)
			var out []string
			for _, f := range resp.BatchItemFailures {
				out = append(out, f.ItemIdentifier)
			}
			return out
		}},
	}
	for _, a := range adapters {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(memstore.New(), "adapters")
			require.NoError(t, err)
			count := map[string]int{}
			ran := func(id string) { count[id]++ }
			reported := a.run(t, g, "2", ran)
			assert.Equal(t, a.reported, reported)
			if a.ordered {
				assert.Zero(t, count["3"], "nothing after the group's failure runs")
			} else {
				assert.Equal(t, 1, count["3"])
			}
			assert.Empty(t, a.run(t, g, "", ran), "the redelivery succeeds")
			for _, id := range ids {
				assert.Equal(t, 1, count[id], "record %s ran once", id)
			}
		})
	}
}

// countRecord is the record handler of TestEveryAdapter: it fails the record named fail and
// counts the others. The adapters run one record at a time here (WithConcurrency(1)),
// so the count needs no lock.
func countRecord(id, fail string, ran func(string)) error {
	if id == fail {
		return errors.New("fails")
	}
	ran(id)
	return nil
}

func runSQS(t *testing.T, g *idem.Guard, fail string, ran func(string), arn string, ids, group []string) []string {
	t.Helper()
	h, err := sqs.New(g, func(_ context.Context, m events.SQSMessage) error { return countRecord(m.MessageId, fail, ran) },
		sqs.WithConcurrency(1))
	require.NoError(t, err)
	var ev events.SQSEvent
	for i, id := range ids {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: id, Body: id, EventSourceARN: arn,
			Attributes: map[string]string{"MessageGroupId": group[i]}})
	}
	resp, err := h.Handle(testContext(t), ev)
	require.NoError(t, err)
	var out []string
	for _, f := range resp.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
