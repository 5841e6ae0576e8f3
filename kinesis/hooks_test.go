package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/kinesis"
)

// TestOnBatchAndLogsNameSequenceNumbers: the guard's OnBatch hook and the log lines name
// the records by their sequence numbers, never by their keys or data.
func TestOnBatchAndLogsNameSequenceNumbers(t *testing.T) {
	t.Parallel()
	const secret = "evt-7f3a-secret"
	obs := adaptertest.Observe(t, "hooks")
	g := obs.Guard
	h, err := kinesis.New(g, func(_ context.Context, r events.KinesisEventRecord) error {
		if strings.Contains(string(r.Kinesis.Data), `"n":1`) {
			return errors.New("failed")
		}
		return nil
	}, kinesis.WithKeyJMESPath("id"), kinesis.WithConcurrency(1))
	require.NoError(t, err)
	var ev events.KinesisEvent
	for i := range 3 {
		r := record(fmt.Sprint(500+i), "pk", fmt.Sprintf(`{"id":"%s-%d","n":%d}`, secret, i, i))
		r.EventSourceArn = "arn:aws:kinesis:eu-west-1:123456789012:stream/ledger"
		ev.Records = append(ev.Records, r)
	}
	_, err = h.Handle(adaptertest.Context(t), ev)
	require.NoError(t, err)

	got := obs.Events()
	require.Len(t, got, 1)
	e := got[0]
	assert.True(t, e.FIFO, "processed in order per partition key")
	assert.Equal(t, "aws_kinesis", e.System)
	assert.Equal(t, "ledger", e.Destination, "the stream's name")
	ids, statuses := adaptertest.Items(e)
	assert.Equal(t, []string{"500", "501", "502"}, ids)
	assert.Equal(t, []string{"ran/", "failed/handler", "failed/group_stopped"}, statuses)
	assert.Equal(t, 1, e.Ran)
	assert.Equal(t, 2, e.Failed)
	obs.NoSecret(t, secret)
	assert.Contains(t, obs.Lines(), `"msg":"kinesis: record failed","sequence_number":"501","stored_key":"`)
	assert.Contains(t, obs.Lines(), `"msg":"kinesis: batch processed","records":3,"ordered":true`)
}
