package sqs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/internal/ddbcount"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// Tests of batch.go: how a batch is split into units, how many run at once, and what
// makes it a FIFO batch.

func TestConcurrency(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    []sqs.Option
		barrier int // handlers wait until this many run at once
		peak    int
	}{
		{name: "default runs ten at once", barrier: 10, peak: 10},
		{name: "bounded", opts: []sqs.Option{sqs.WithConcurrency(3)}, barrier: 3, peak: 3},
		{name: "one at a time", opts: []sqs.Option{sqs.WithConcurrency(1)}, barrier: 1, peak: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, memBackend(), tc.opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			arrived := make(chan struct{}, 10)
			full := make(chan struct{})
			e.rec.before = func(ctx context.Context, _ events.SQSMessage) {
				arrived <- struct{}{}
				select {
				case <-full:
				case <-ctx.Done():
				}
			}
			opened := make(chan struct{})
			go func() { // opens the barrier once enough handlers have arrived
				defer close(opened)
				for n := 0; n < tc.barrier; n++ {
					select {
					case <-arrived:
					case <-ctx.Done():
						return
					}
				}
				close(full)
			}()
			resp := invoke(t, ctx, e.h, loadEvent(t, "sqs-standard-ten"))
			cancel()
			<-opened
			assert.Empty(t, adaptertest.Failures(t, resp))
			assert.Equal(t, tc.peak, e.rec.peak)
		})
	}
}

func TestFIFOGroupsSharingAKeyAreNotRaced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, memBackend())
	ev := loadEvent(t, "sqs-fifo-two-groups")
	// The second of acc-2 (record 4) repeats the second of acc-1 (record 2): same key, body.
	ev.Records[4].Attributes["MessageDeduplicationId"] = ev.Records[2].Attributes["MessageDeduplicationId"]
	ev.Records[4].Body = ev.Records[2].Body

	resp := invoke(t, context.Background(), e.h, ev)
	assert.Empty(t, adaptertest.Failures(t, resp), "no in-progress failure from racing the shared key")
	assert.Equal(t, sqs.StatusDuplicate, e.reports.last(t).Outcomes[4].Status)
	assert.Equal(t, pick(ev, 0, 2, 3, 5, 7), e.rec.groupOrder("acc-1"))
	assert.Equal(t, pick(ev, 1, 6), e.rec.groupOrder("acc-2"))
}

// withARN returns ev with every record's eventSourceARN set to arn.
func withARN(ev events.SQSEvent, arn string) events.SQSEvent {
	ev.Records = append([]events.SQSMessage(nil), ev.Records...)
	for i := range ev.Records {
		ev.Records[i].EventSourceARN = arn
	}
	return ev
}

// TestFIFOIsTheARNSuffixOnly processes one FIFO fixture (two message groups, every message
// with a MessageGroupId, a MessageDeduplicationId and a SequenceNumber) under three queue
// ARNs: only the ".fifo" suffix makes the batch FIFO, holding back the rest of a group after
// a failure and claiming each key on its own; without it, the same messages are a standard
// (fair) queue's batch, processed concurrently with batch claims.
func TestFIFOIsTheARNSuffixOnly(t *testing.T) {
	t.Parallel()
	const queue = "arn:aws:sqs:eu-west-1:123456789012:ledger-credits"
	tests := []struct {
		name       string
		arn        string
		fifo       bool
		failed     []int // records reported, in order
		reasons    map[sqs.Reason]int
		batchCalls bool // ClaimMany, CompleteMany or ReleaseMany called
	}{
		{
			name: "FIFO queue ARN", arn: queue + ".fifo", fifo: true,
			failed:  []int{3, 5, 7},
			reasons: map[sqs.Reason]int{sqs.ReasonHandler: 1, sqs.ReasonGroupStopped: 2},
		},
		{
			name: "standard queue ARN", arn: queue,
			failed: []int{3}, reasons: map[sqs.Reason]int{sqs.ReasonHandler: 1}, batchCalls: true,
		},
		{
			name: "no ARN", arn: "",
			failed: []int{3}, reasons: map[sqs.Reason]int{sqs.ReasonHandler: 1}, batchCalls: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := &storeCalls{Store: memstore.New()}
			rs, rec := &reports{}, newRecorder()
			guard, err := idem.New(store, "test", idem.WithHooks(rs.hooks()))
			require.NoError(t, err)
			h, err := sqs.New(guard, rec.handle)
			require.NoError(t, err)
			ev := withARN(loadEvent(t, "sqs-fifo-two-groups"), tc.arn)
			for _, m := range ev.Records {
				require.NotEmpty(t, m.Attributes["MessageGroupId"])
				require.NotEmpty(t, m.Attributes["MessageDeduplicationId"])
				require.NotEmpty(t, m.Attributes["SequenceNumber"])
			}
			rec.setFail(ev.Records[3].MessageId, errors.New("ledger: account acc-1 locked"))

			resp := invoke(t, context.Background(), h, ev)
			assert.Equal(t, pick(ev, tc.failed...), adaptertest.Failures(t, resp))
			rep := rs.last(t)
			assert.Equal(t, tc.fifo, rep.FIFO)
			assert.Equal(t, tc.reasons, rep.FailedBy())
			assert.Equal(t, tc.batchCalls, store.many.Load() > 0, "batch store calls: %d", store.many.Load())
			if !tc.batchCalls {
				assert.Positive(t, store.single.Load(), "each key claimed on its own")
			}
		})
	}
}

// TestFIFOBatchNeedsNoPartiQL counts the DynamoDB calls of a FIFO consumer on DynamoDB
// Local, through a first delivery with a failure (a release, a held-back group) and the
// redelivery of what it reported: only single-item operations, never the
// BatchExecuteStatement (PartiQL) or BatchGetItem calls of batch claims, which the same
// messages make from a standard queue.
func TestFIFOBatchNeedsNoPartiQL(t *testing.T) {
	t.Parallel()
	const queue = "arn:aws:sqs:eu-west-1:123456789012:ledger-credits"
	singleItem := map[string]bool{"PutItem": true, "GetItem": true, "UpdateItem": true, "DeleteItem": true, "TransactWriteItems": true}
	tests := []struct {
		name    string
		arn     string
		partiQL bool
	}{
		{"FIFO", queue + ".fifo", false},
		{"standard", queue, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, idemTable, ledgerTable := ddbTables(t)
			api := ddbcount.New(client)
			store, err := dynamo.New(api, idemTable)
			require.NoError(t, err)
			e := &env{store: store, ledger: &ddbLedger{client: client, table: ledgerTable}, rec: newRecorder(), reports: &reports{}}
			e.rec.effect = e.ledger.credit // attached: TransactWriteItems
			e.guard = e.newGuard(t)
			e.h = e.newHandler(t, e.guard)
			ev := withARN(loadEvent(t, "sqs-fifo-two-groups"), tc.arn)
			failed := ev.Records[3].MessageId
			e.rec.setFail(failed, errors.New("ledger: account acc-1 locked"))

			reported := adaptertest.Failures(t, invoke(t, context.Background(), e.h, ev))
			require.Contains(t, reported, failed)
			first := api.Take()
			e.rec.setFail(failed, nil)
			assert.Empty(t, adaptertest.Failures(t, invoke(t, context.Background(), e.h, redeliver(ev, reported...))))
			again := api.Take()

			for _, calls := range []map[string]int{first, again} {
				for op := range calls {
					if !tc.partiQL {
						assert.True(t, singleItem[op], "a FIFO consumer called %s", op)
					}
				}
			}
			assert.Equal(t, tc.partiQL, first["BatchExecuteStatement"] > 0, "PartiQL calls: %v", first)
			assert.Positive(t, first["PutItem"]+again["PutItem"], "the claims: %v, %v", first, again)
			for acc, cents := range expectedBalances(t, ev) {
				assert.Equal(t, cents, e.ledger.balance(t, acc), "every credit applied once: %s", acc)
			}
		})
	}
}
