package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/kafka"
	"github.com/idemkit/idem/memstore"
)

// TestOnBatchAndLogsNameOffsets: the guard's OnBatch hook and the log lines name the
// records by topic-partition and offset, never by their keys, record keys or values.
func TestOnBatchAndLogsNameOffsets(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		got   []idem.BatchEvent
		lines strings.Builder
	)
	hooks := idem.Hooks{OnBatch: func(_ context.Context, e idem.BatchEvent) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e)
	}}
	logger := slog.New(slog.NewJSONHandler(&lines, nil))
	g, err := idem.New(memstore.New(), "hooks", idem.WithHooks(hooks), idem.WithLogger(logger))
	require.NoError(t, err)
	h, err := kafka.New(g, func(_ context.Context, r events.KafkaRecord) error {
		if r.Offset == 11 {
			return errors.New("failed")
		}
		return nil
	}, kafka.WithConcurrency(1), kafka.WithReportBatchItemFailures(true))
	require.NoError(t, err)
	_, err = h.Handle(lambdaContext(t), loadEvent(t, "kafka-two-partitions"))
	require.NoError(t, err)

	require.Len(t, got, 1)
	e := got[0]
	assert.True(t, e.FIFO, "processed in order per record key")
	assert.Equal(t, "kafka", e.System)
	assert.Equal(t, "credits", e.Destination, "the topic")
	var ids, statuses []string
	for _, it := range e.Items {
		ids, statuses = append(ids, it.ID), append(statuses, it.Status+"/"+it.Reason)
	}
	assert.Equal(t, []string{"credits-0@10", "credits-0@11", "credits-0@12", "credits-0@13", "credits-1@5"}, ids)
	assert.Equal(t, []string{"ran/", "failed/handler", "failed/group_stopped", "ran/", "ran/"}, statuses)
	dump, err := json.Marshal(e.Items)
	require.NoError(t, err)
	for _, secret := range []string{"e1", "e2", "e3", "acct-1", "YWNjdC0x"} {
		assert.NotContains(t, string(dump), `"`+secret+`"`)
		assert.NotContains(t, lines.String(), `"`+secret+`"`)
	}
	assert.Contains(t, lines.String(), `"msg":"kafka: record failed","record_id":"credits-0@11","stored_key":"`)
	assert.Contains(t, lines.String(), `"msg":"kafka: batch processed","records":5,"ordered":true`)
}
