package sqs_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/sqs"
)

var update = flag.Bool("update", false, "rewrite the expected responses in testdata/*.golden.json")

// loadEvent reads testdata/name.json.
func loadEvent(t testing.TB, name string) events.SQSEvent {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	require.NoError(t, err)
	var ev events.SQSEvent
	require.NoError(t, json.Unmarshal(raw, &ev))
	require.NotEmpty(t, ev.Records)
	return ev
}

// functionTimeout is the deadline the tests give a batch whose context has none, as
// Lambda always does: without a deadline, batch claims record each outcome as soon as its
// handler returns (idem.Batch).
const functionTimeout = 5 * time.Minute

// lambdaContext returns a context with the deadline of an invocation that has just begun.
func lambdaContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), functionTimeout)
	t.Cleanup(cancel)
	return ctx
}

// invoke sends ev through the Lambda runtime's JSON handler, as Lambda would, and returns
// the raw response. A ctx without a deadline gets functionTimeout's.
func invoke(t testing.TB, ctx context.Context, h *sqs.Handler, ev events.SQSEvent) []byte {
	t.Helper()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, functionTimeout)
		defer cancel()
	}
	payload, err := json.Marshal(ev)
	require.NoError(t, err)
	out, err := lambda.NewHandler(h.Handle).Invoke(ctx, payload)
	require.NoError(t, err)
	return out
}

// failures decodes a response into its failed message IDs, in order.
func failures(t testing.TB, raw []byte) []string {
	t.Helper()
	var resp events.SQSEventResponse
	require.NoError(t, json.Unmarshal(raw, &resp))
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// checkGolden compares a response with testdata/name.golden.json, or rewrites the file
// under -update.
func checkGolden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		var v any
		require.NoError(t, json.Unmarshal(got, &v))
		pretty, err := json.MarshalIndent(v, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(pretty, '\n'), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	assert.JSONEq(t, string(want), string(got))
}

// pick returns the message IDs of the records at idx.
func pick(ev events.SQSEvent, idx ...int) []string {
	ids := make([]string, len(idx))
	for i, j := range idx {
		ids[i] = ev.Records[j].MessageId
	}
	return ids
}

// redeliver returns the event SQS sends when it delivers the messages ids of ev again: the
// same messages, in order, with a higher receive count and new receipt handles.
func redeliver(ev events.SQSEvent, ids ...string) events.SQSEvent {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var out events.SQSEvent
	for _, m := range ev.Records {
		if !want[m.MessageId] {
			continue
		}
		attrs := make(map[string]string, len(m.Attributes))
		for k, v := range m.Attributes {
			attrs[k] = v
		}
		n, _ := strconv.Atoi(attrs["ApproximateReceiveCount"])
		attrs["ApproximateReceiveCount"] = strconv.Itoa(n + 1)
		m.Attributes = attrs
		m.ReceiptHandle += "-redelivered-" + strconv.Itoa(n+1)
		out.Records = append(out.Records, m)
	}
	return out
}
