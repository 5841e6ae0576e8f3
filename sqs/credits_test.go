package sqs_test

import (
	"context"
	"sync"
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

// TestCreditsApplyOncePerKey delivers a batch with duplicates to four invocations at once
// (four containers, as when a visibility timeout ends while the first is still running),
// then redelivers whatever they reported until nothing is, then delivers the whole batch
// once more: every credit, a non-idempotent ADD attached to the completion, is applied
// exactly once per key.
func TestCreditsApplyOncePerKey(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ten, same := loadEvent(t, "sqs-standard-ten"), loadEvent(t, "sqs-standard-same-key")
		ev := events.SQSEvent{Records: append(append([]events.SQSMessage(nil), ten.Records...), same.Records...)}
		containers := make([]*sqs.Handler, 4)
		for i := range containers {
			containers[i] = e.newHandler(t, e.newGuard(t))
		}

		var mu sync.Mutex
		retry := map[string]bool{}
		var wg sync.WaitGroup
		wg.Add(len(containers))
		for _, h := range containers {
			go func() {
				defer wg.Done()
				rep, err := h.Process(adaptertest.Context(t), ev)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, f := range rep.Response().BatchItemFailures {
					retry[f.ItemIdentifier] = true
				}
				for _, o := range rep.Outcomes {
					if o.Failed() { // the owner, or a duplicate sharing the owner's failure
						assert.ErrorIs(t, o.Err, idem.ErrInProgress, "only a concurrent owner fails a message")
					}
				}
			}()
		}
		wg.Wait()

		t.Logf("%d messages reported by the concurrent deliveries", len(retry))
		for round := 0; len(retry) > 0; round++ {
			require.Less(t, round, 5, "redeliveries converge")
			var ids []string
			for id := range retry {
				ids = append(ids, id)
			}
			retry = map[string]bool{}
			for _, id := range adaptertest.Failures(t, invoke(t, context.Background(), containers[round%len(containers)], redeliver(ev, ids...))) {
				retry[id] = true
			}
		}
		assert.Empty(t, adaptertest.Failures(t, invoke(t, context.Background(), containers[0], redeliver(ev, pick(ev, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)...))))

		e.rec.requireOncePerKey(t, ev)
		for acc, cents := range expectedBalances(t, ev) {
			assert.Equal(t, cents, e.ledger.balance(t, acc), "balance of %s", acc)
		}
	})
}

// TestRoundTripsPerBatch counts the DynamoDB requests of a batch of ten new messages, of
// the same ten replayed, and of five messages with two keys, on both paths. Per message, a
// new key costs a claim and a completion, a replay one claim, an intra-batch duplicate
// none. With batch claims, the claims of a batch are one BatchExecuteStatement (plus one
// BatchGetItem for replays, to read the records back), and so are the completions; with
// attached writes the completions go in as few TransactWriteItems as DynamoDB allows: one
// per message crediting the same account, since a transaction may not touch an item twice
// (the ten credit acc-1 and acc-2 three times each: three transactions).
func TestRoundTripsPerBatch(t *testing.T) {
	t.Parallel()
	type calls = map[string]int
	tests := []struct {
		name                string
		batch, attach       bool
		wantNew, wantReplay calls
		wantDuplicates      calls
	}{
		{
			name: "batch claims, plain handler", batch: true,
			wantNew:        calls{"BatchExecuteStatement": 2},
			wantReplay:     calls{"BatchExecuteStatement": 1, "BatchGetItem": 1},
			wantDuplicates: calls{"BatchExecuteStatement": 2},
		},
		{
			name: "batch claims, attached writes", batch: true, attach: true,
			wantNew:        calls{"BatchExecuteStatement": 1, "TransactWriteItems": 3},
			wantReplay:     calls{"BatchExecuteStatement": 1, "BatchGetItem": 1},
			wantDuplicates: calls{"BatchExecuteStatement": 1, "TransactWriteItems": 1},
		},
		{
			name:           "per message, plain handler",
			wantNew:        calls{"PutItem": 10, "UpdateItem": 10},
			wantReplay:     calls{"PutItem": 10},
			wantDuplicates: calls{"PutItem": 2, "UpdateItem": 2},
		},
		{
			name: "per message, attached writes", attach: true,
			wantNew:        calls{"PutItem": 10, "TransactWriteItems": 10},
			wantReplay:     calls{"PutItem": 10},
			wantDuplicates: calls{"PutItem": 2, "TransactWriteItems": 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, idemTable, ledgerTable := ddbTables(t)
			api := ddbcount.New(client)
			store, err := dynamo.New(api, idemTable)
			require.NoError(t, err)
			e := &env{store: store, ledger: &ddbLedger{client: client, table: ledgerTable}, rec: newRecorder(), reports: &reports{}}
			if tc.attach {
				e.rec.effect = e.ledger.credit
			}
			e.guard = e.newGuard(t)
			e.h = e.newHandler(t, e.guard, sqs.WithBatchClaims(tc.batch))

			ten := loadEvent(t, "sqs-standard-ten")
			assert.Empty(t, adaptertest.Failures(t, invoke(t, context.Background(), e.h, ten)))
			assert.Equal(t, tc.wantNew, api.Take(), "new")
			assert.Empty(t, adaptertest.Failures(t, invoke(t, context.Background(), e.h, ten)))
			assert.Equal(t, tc.wantReplay, api.Take(), "replayed")
			assert.Equal(t, 10, e.reports.last(t).Replayed)

			same := loadEvent(t, "sqs-standard-same-key") // five messages, two keys
			assert.Empty(t, adaptertest.Failures(t, invoke(t, context.Background(), e.h, same)))
			assert.Equal(t, tc.wantDuplicates, api.Take(), "duplicates in the batch")
		})
	}
}
