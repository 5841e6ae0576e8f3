package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/kafka"
)

// TestOnBatchAndLogsNameOffsets: the guard's OnBatch hook and the log lines name the
// records by topic-partition and offset, never by their keys, record keys or values.
func TestOnBatchAndLogsNameOffsets(t *testing.T) {
	t.Parallel()
	obs := adaptertest.Observe(t, "hooks")
	g := obs.Guard
	h, err := kafka.New(g, func(_ context.Context, r events.KafkaRecord) error {
		if r.Offset == 11 {
			return errors.New("failed")
		}
		return nil
	}, kafka.WithConcurrency(1), kafka.WithReportBatchItemFailures(true))
	require.NoError(t, err)
	_, err = h.Handle(adaptertest.Context(t), loadEvent(t, "kafka-two-partitions"))
	require.NoError(t, err)

	got := obs.Events()
	require.Len(t, got, 1)
	e := got[0]
	assert.True(t, e.FIFO, "processed in order per record key")
	assert.Equal(t, "kafka", e.System)
	assert.Equal(t, "credits", e.Destination, "the topic")
	ids, statuses := adaptertest.Items(e)
	assert.Equal(t, []string{"credits-0@10", "credits-0@11", "credits-0@12", "credits-0@13", "credits-1@5"}, ids)
	assert.Equal(t, []string{"ran/", "failed/handler", "failed/group_stopped", "ran/", "ran/"}, statuses)
	dump, err := json.Marshal(e.Items)
	require.NoError(t, err)
	for _, secret := range []string{"e1", "e2", "e3", "acct-1", "YWNjdC0x"} {
		assert.NotContains(t, string(dump), `"`+secret+`"`)
		assert.NotContains(t, obs.Lines(), `"`+secret+`"`)
	}
	assert.Contains(t, obs.Lines(), `"msg":"kafka: record failed","record_id":"credits-0@11","stored_key":"`)
	assert.Contains(t, obs.Lines(), `"msg":"kafka: batch processed","records":5,"ordered":true`)
}
