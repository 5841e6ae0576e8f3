package esm_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/esm"
)

// poison returns a handler that fails every batch holding one of the poisoned records:
// with a function error, or with a partial response naming them when partial is set.
func poison(partial bool, bad ...string) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		var resp events.DynamoDBEventResponse
		for _, seq := range seqsOf(ev) {
			if slices.Contains(bad, seq) {
				if !partial {
					return resp, errors.New("poisoned")
				}
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: seq})
			}
		}
		return resp, nil
	}
}

// sizes returns the size of each invocation's batch.
func sizes(r *esm.Report) []int {
	out := make([]int, len(r.Invocations))
	for i, inv := range r.Invocations {
		out[i] = len(inv.Records)
	}
	return out
}

func TestRetriesAndBisection(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		records   int
		bad       []int
		partial   bool
		opts      []esm.Option
		sizes     []int
		discarded [][]int
	}{
		{
			// AWS: a function error retries the whole batch; once the retries run
			// out, the batch goes to the on-failure destination.
			name: "whole batch retried then discarded", records: 8, bad: []int{2},
			opts:      []esm.Option{esm.WithBatchSize(5), esm.WithMaximumRetryAttempts(2)},
			sizes:     []int{5, 5, 5, 3},
			discarded: [][]int{{0, 1, 2, 3, 4}},
		},
		{
			// AWS: bisection halves a failed batch, and a split costs no retry; the
			// poisoned record alone uses up the retries.
			name: "bisect down to the poisoned record", records: 8, bad: []int{5},
			opts:      []esm.Option{esm.WithBatchSize(8), esm.WithBisectBatchOnFunctionError(), esm.WithMaximumRetryAttempts(1)},
			sizes:     []int{8, 4, 4, 2, 1, 1, 1, 2},
			discarded: [][]int{{5}},
		},
		{
			name: "no retries at all", records: 4, bad: []int{0},
			opts:      []esm.Option{esm.WithBatchSize(2), esm.WithMaximumRetryAttempts(0)},
			sizes:     []int{2, 2},
			discarded: [][]int{{0, 1}},
		},
		{
			// AWS: with partial responses, the checkpoint stops at the reported
			// record and the next batch starts there, up to BatchSize.
			name: "partial failure retried from the record", records: 9, bad: []int{3}, partial: true,
			opts:      []esm.Option{esm.WithBatchSize(5), esm.WithReportBatchItemFailures(), esm.WithMaximumRetryAttempts(1)},
			sizes:     []int{5, 5, 1},
			discarded: [][]int{{3, 4, 5, 6, 7}},
		},
		{
			// AWS: with bisection as well, the batch splits at the reported record
			// and only the rest of the batch is retried.
			name: "partial failure with bisection retries the rest of the batch", records: 9, bad: []int{3}, partial: true,
			opts:      []esm.Option{esm.WithBatchSize(5), esm.WithReportBatchItemFailures(), esm.WithBisectBatchOnFunctionError(), esm.WithMaximumRetryAttempts(1)},
			sizes:     []int{5, 2, 4},
			discarded: [][]int{{3, 4}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := newFakeStream()
			seqs := src.add("shard-0", "", tc.records)
			var bad []string
			for _, i := range tc.bad {
				bad = append(bad, seqs[i])
			}
			r := drain(t, src, poison(tc.partial, bad...), tc.opts...)
			assert.Equal(t, tc.sizes, sizes(r), "batch sizes")
			require.Len(t, r.Discarded, len(tc.discarded))
			for i, d := range tc.discarded {
				var want []string
				for _, j := range d {
					want = append(want, seqs[j])
				}
				assert.Equal(t, want, r.Discarded[i].Records)
				assert.Equal(t, "RetryAttemptsExhausted", r.Discarded[i].Condition)
			}
			assert.Equal(t, seqs[len(seqs)-1], r.Checkpoints["shard-0"])
			// Every poisoned record was discarded, never finished.
			done := r.Done()["shard-0"]
			for _, b := range bad {
				assert.NotContains(t, done, b)
			}
		})
	}
}
