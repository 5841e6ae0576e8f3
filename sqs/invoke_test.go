package sqs_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/sqs"
)

// loadEvent reads testdata/name.json.
func loadEvent(t testing.TB, name string) events.SQSEvent {
	t.Helper()
	return adaptertest.Load[events.SQSEvent](t, name)
}

// invoke sends ev through the Lambda runtime's JSON handler, as Lambda would, and returns
// the raw response. A ctx without a deadline gets adaptertest.FunctionTimeout's.
func invoke(t testing.TB, ctx context.Context, h *sqs.Handler, ev events.SQSEvent) []byte {
	t.Helper()
	out, err := adaptertest.Invoke(t, ctx, h.Handle, ev)
	require.NoError(t, err)
	return out
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
