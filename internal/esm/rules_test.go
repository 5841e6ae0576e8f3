package esm_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/esm"
)

// seqsOf returns the sequence numbers of a DynamoDB event.
func seqsOf(ev events.DynamoDBEvent) []string {
	out := make([]string, len(ev.Records))
	for i, r := range ev.Records {
		out[i] = r.Change.SequenceNumber
	}
	return out
}

func drain(t *testing.T, src esm.Source, handler any, opts ...esm.Option) *esm.Report {
	t.Helper()
	p, err := esm.New(src, handler, opts...)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Check())
	return r
}

// TestResponseRules drives one shard of four records through a handler that answers the
// first invocation with a fixed raw response and succeeds afterwards.
func TestResponseRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		report   bool
		response func(seqs []string) string
		outcome  esm.Outcome
		done     int
		retried  []string // the second invocation's records
	}{
		{"null response", true, func([]string) string { return `null` }, esm.Success, 4, nil},
		{"empty object", true, func([]string) string { return `{}` }, esm.Success, 4, nil},
		{"empty list", true, func([]string) string { return `{"batchItemFailures":[]}` }, esm.Success, 4, nil},
		{"null list", true, func([]string) string { return `{"batchItemFailures":null}` }, esm.Success, 4, nil},
		{"lowest of several", true, func(s []string) string {
			return `{"batchItemFailures":[{"itemIdentifier":"` + s[3] + `"},{"itemIdentifier":"` + s[1] + `"}]}`
		}, esm.PartialFailure, 1, []string{"1", "2", "3"}},
		{"first record", true, func(s []string) string {
			return `{"batchItemFailures":[{"itemIdentifier":"` + s[0] + `"}]}`
		}, esm.PartialFailure, 0, []string{"0", "1", "2", "3"}},
		{"empty identifier", true, func([]string) string {
			return `{"batchItemFailures":[{"itemIdentifier":""}]}`
		}, esm.InvalidResponse, 0, []string{"0", "1", "2", "3"}},
		{"null identifier", true, func([]string) string {
			return `{"batchItemFailures":[{"itemIdentifier":null}]}`
		}, esm.InvalidResponse, 0, []string{"0", "1", "2", "3"}},
		{"missing identifier", true, func([]string) string {
			return `{"batchItemFailures":[{"id":"1"}]}`
		}, esm.InvalidResponse, 0, []string{"0", "1", "2", "3"}},
		{"unknown identifier beside a known one", true, func(s []string) string {
			return `{"batchItemFailures":[{"itemIdentifier":"` + s[2] + `"},{"itemIdentifier":"99"}]}`
		}, esm.InvalidResponse, 0, []string{"0", "1", "2", "3"}},
		{"not an object", true, func([]string) string { return `"ok"` }, esm.InvalidResponse, 0, []string{"0", "1", "2", "3"}},
		{"partial response ignored when not reporting", false, func(s []string) string {
			return `{"batchItemFailures":[{"itemIdentifier":"` + s[1] + `"}]}`
		}, esm.Success, 4, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := newFakeStream()
			seqs := src.add("shard-0", "", 4)
			src.close("shard-0")
			calls := 0
			handler := func(_ context.Context, ev events.DynamoDBEvent) (json.RawMessage, error) {
				calls++
				if calls == 1 {
					return json.RawMessage(tc.response(seqsOf(ev))), nil
				}
				return json.RawMessage(`{}`), nil
			}
			var opts []esm.Option
			if tc.report {
				opts = append(opts, esm.WithReportBatchItemFailures())
			}
			r := drain(t, src, handler, opts...)
			require.NotEmpty(t, r.Invocations)
			first := r.Invocations[0]
			assert.Equal(t, tc.outcome, first.Outcome)
			assert.Equal(t, tc.done, first.Done)
			if tc.outcome == esm.InvalidResponse {
				assert.Error(t, first.Err)
			}
			var want []string
			for _, i := range tc.retried {
				want = append(want, seqs[i[0]-'0'])
			}
			if want == nil {
				assert.Len(t, r.Invocations, 1)
			} else {
				require.Len(t, r.Invocations, 2)
				assert.Equal(t, want, r.Invocations[1].Records)
			}
			assert.Equal(t, seqs[3], r.Checkpoints["shard-0"])
		})
	}
}

// TestFunctionErrors: a returned error, a panic, a crash, a timeout, a lost response and
// an injected failure each fail the whole batch, which is then delivered again.
func TestFunctionErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	cases := []struct {
		name    string
		opts    []esm.Option
		handler func(ctx context.Context, first bool) error
		want    error
		ran     int // handler runs in all
	}{
		{"returned error", nil, func(_ context.Context, first bool) error {
			if first {
				return boom
			}
			return nil
		}, boom, 2},
		{"panic", nil, func(_ context.Context, first bool) error {
			if first {
				panic("boom")
			}
			return nil
		}, esm.ErrPanic, 2},
		{"crash", nil, func(ctx context.Context, first bool) error {
			if first {
				esm.Crash(ctx)
				return ctx.Err()
			}
			return nil
		}, esm.ErrCrashed, 2},
		{"crash then success returned", nil, func(ctx context.Context, first bool) error {
			if first {
				esm.Crash(ctx)
			}
			return nil
		}, esm.ErrCrashed, 2},
		{"timeout", []esm.Option{esm.WithTimeout(20 * time.Millisecond)}, func(ctx context.Context, first bool) error {
			if first {
				<-ctx.Done()
			}
			return nil
		}, esm.ErrTimeout, 2},
		{"lost response", []esm.Option{esm.WithFault(func(b esm.Batch) esm.Fault {
			if b.Retry == 0 {
				return esm.FaultLoseResponse
			}
			return esm.FaultNone
		})}, func(context.Context, bool) error { return nil }, esm.ErrResponseLost, 2},
		{"injected before the handler", []esm.Option{esm.WithFault(func(b esm.Batch) esm.Fault {
			if b.Retry == 0 {
				return esm.FaultFail
			}
			return esm.FaultNone
		})}, func(context.Context, bool) error { return nil }, esm.ErrInjected, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := newFakeStream()
			seqs := src.add("shard-0", "", 3)
			ran := 0
			handler := func(ctx context.Context, _ events.DynamoDBEvent) error {
				ran++
				return tc.handler(ctx, ran == 1)
			}
			r := drain(t, src, handler, tc.opts...)
			require.Len(t, r.Invocations, 2)
			assert.Equal(t, esm.FunctionError, r.Invocations[0].Outcome)
			assert.ErrorIs(t, r.Invocations[0].Err, tc.want)
			assert.Equal(t, 0, r.Invocations[0].Done)
			assert.Equal(t, "", r.Invocations[0].Checkpoint)
			assert.Equal(t, seqs, r.Invocations[1].Records)
			assert.Equal(t, 1, r.Invocations[1].Retry)
			assert.Equal(t, esm.Success, r.Invocations[1].Outcome)
			assert.Equal(t, tc.ran, ran)
		})
	}
}

// TestShardsInParallelInOrder: shards run concurrently, one batch in flight each, records
// of a shard in sequence order, and a child shard only after its parent.
func TestShardsInParallelInOrder(t *testing.T) {
	t.Parallel()
	src := newFakeStream()
	src.add("a", "", 7)
	src.add("b", "", 5)
	src.close("a")
	src.add("a-child", "a", 4)
	var mu sync.Mutex
	inFlight := map[string]int{}
	var seen []string // shard of each record, in delivery order
	last := map[string]string{}
	handler := func(_ context.Context, ev events.DynamoDBEvent) error {
		shard := ev.Records[0].EventID[:len(ev.Records[0].EventID)-22]
		mu.Lock()
		inFlight[shard]++
		n := inFlight[shard]
		for _, r := range ev.Records {
			seq := r.Change.SequenceNumber
			assert.True(t, last[shard] == "" || esm.SequenceLess(last[shard], seq), "out of order in %s", shard)
			last[shard] = seq
			seen = append(seen, shard)
		}
		mu.Unlock()
		assert.Equal(t, 1, n, "two batches in flight in %s", shard)
		time.Sleep(time.Millisecond) // give a second batch of the shard a chance to overlap
		mu.Lock()
		inFlight[shard]--
		mu.Unlock()
		return nil
	}
	r := drain(t, src, handler, esm.WithBatchSize(2))
	assert.Len(t, r.Invocations, 4+3+2)
	firstChild := -1
	lastParent := -1
	for i, s := range seen {
		if s == "a-child" && firstChild < 0 {
			firstChild = i
		}
		if s == "a" {
			lastParent = i
		}
	}
	assert.Greater(t, firstChild, lastParent, "the child shard ran before its parent was drained")
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]esm.Option{
		"batch size 0":     esm.WithBatchSize(0),
		"batch size 10001": esm.WithBatchSize(10001),
		"retries -2":       esm.WithMaximumRetryAttempts(-2),
		"timeout 0":        esm.WithTimeout(0),
		"retry delay -1ns": esm.WithRetryDelay(-1),
	} {
		_, err := esm.New(newFakeStream(), func(context.Context) error { return nil }, opt)
		assert.Error(t, err, name)
	}
}

// TestRetryDelayWaitsForContext: after a failed invocation the poller waits the retry
// delay, and a context that ends meanwhile ends the drain with the one invocation made.
func TestRetryDelayWaitsForContext(t *testing.T) {
	t.Parallel()
	src := newFakeStream()
	src.add("shard-0", "", 2)
	p, err := esm.New(src, func(context.Context, events.DynamoDBEvent) error { return errors.New("boom") },
		esm.WithRetryDelay(time.Hour))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r, err := p.Drain(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Len(t, r.Invocations, 1)
	assert.Equal(t, esm.FunctionError, r.Invocations[0].Outcome)
}
