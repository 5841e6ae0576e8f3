package sqs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/internal/ddbcount"
	"github.com/idemkit/idem/sqs"
)

// TestBatchNeverCostsMoreCalls counts the DynamoDB calls (DynamoDB Local) of batches of 1,
// 2, 3, 10 and 25 distinct keys, new and replayed (first delivered and redelivered), with
// batch claims on and off: the batch claim may never cost more calls than the per-message
// path, and costs at most two. It logs the table that BENCHMARKS.md shows ("Batch calls by size").
func TestBatchNeverCostsMoreCalls(t *testing.T) {
	t.Parallel()
	total := func(c map[string]int) (n int) {
		for _, v := range c {
			n += v
		}
		return n
	}
	format := func(c map[string]int) string {
		var parts []string
		for _, op := range []string{"PutItem", "UpdateItem", "GetItem", "BatchExecuteStatement", "BatchGetItem", "TransactWriteItems", "DeleteItem"} {
			if c[op] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", c[op], op))
			}
		}
		return strings.Join(parts, " + ")
	}
	type row struct{ batched, single map[string]int }
	for _, n := range []int{1, 2, 3, 10, 25} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			phases := []string{"new", "replay, redelivered", "replay, first delivery"}
			rows := make([]row, len(phases))
			for _, batched := range []bool{true, false} {
				client, idemTable, _ := ddbTables(t)
				api := ddbcount.New(client)
				store, err := dynamo.New(api, idemTable)
				require.NoError(t, err)
				guard, err := idem.New(store, "cost")
				require.NoError(t, err)
				h, err := sqs.New(guard, func(context.Context, events.SQSMessage) error { return nil }, sqs.WithBatchClaims(batched))
				require.NoError(t, err)
				var ev events.SQSEvent
				for i := range n {
					ev.Records = append(ev.Records, message(fmt.Sprintf("m-%d", i), "{}"))
				}
				for p := range phases {
					count := "1"
					if p == 1 {
						count = "2"
					}
					for i := range ev.Records {
						ev.Records[i].Attributes = map[string]string{"ApproximateReceiveCount": count}
					}
					rep, err := h.Process(adaptertest.Context(t), ev)
					require.NoError(t, err)
					require.Zero(t, rep.Failed, phases[p])
					if p == 0 {
						require.Equal(t, n, rep.Ran, phases[p])
					} else {
						require.Equal(t, n, rep.Replayed, phases[p])
					}
					if batched {
						rows[p].batched = api.Take()
					} else {
						rows[p].single = api.Take()
					}
				}
			}
			for p, r := range rows {
				t.Logf("| %d | %s | %d (%s) | %d (%s) |", n, phases[p], total(r.batched), format(r.batched), total(r.single), format(r.single))
				assert.LessOrEqual(t, total(r.batched), total(r.single), "%s: batched %v, per message %v", phases[p], r.batched, r.single)
				// The rule's bound for up to 25 keys: new keys two calls, replays at most two.
				bound := 2
				if p > 0 {
					bound = min(n, 2)
				}
				assert.LessOrEqual(t, total(r.batched), bound, "%s: batched %v", phases[p], r.batched)
			}
		})
	}
}
