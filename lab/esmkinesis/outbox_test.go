package esmkinesis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/esm"
	idemkinesis "github.com/idemkit/idem/kinesis"
	"github.com/idemkit/idem/lab/esmkinesis"
	"github.com/idemkit/idem/lab/kinesalite"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/kinesispub"
)

// TestOutboxPublisherEndToEnd publishes outbox messages with kinesispub through
// kinesalite's PutRecords (several per ordering key, so they go in successive calls),
// publishes the first half again as a relay does after lost answers, and drains the
// stream through package kinesis keyed on the envelope's event id
// (WithKeyJMESPath(outbox.EnvelopeKey)), as Lambda's event source mapping does: every
// event takes effect exactly once, each ordering key's in order.
func TestOutboxPublisherEndToEnd(t *testing.T) {
	t.Parallel()
	client := kinesalite.Client(t)
	ctx := drainCtx(t)
	name := newStream(t, client, 2)

	var msgs []outbox.Message
	for i := range 12 {
		msgs = append(msgs, outbox.Message{ID: fmt.Sprintf("ev-%02d", i), OutboxEvent: outbox.Event{
			Destination: name, OrderingKey: fmt.Sprintf("acct-%d", i%3), Type: "Paid",
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)),
		}})
	}
	pub := kinesispub.New(client)
	assert.Equal(t, make([]error, 12), pub.Publish(ctx, msgs))
	assert.Equal(t, make([]error, 6), pub.Publish(ctx, msgs[:6]), "the relay's retry after lost answers")

	src, err := esmkinesis.Open(ctx, client, name)
	require.NoError(t, err)
	g, err := idem.New(memstore.New(), "outbox-kinesis-e2e")
	require.NoError(t, err)
	var eff effects
	var mu sync.Mutex
	order := map[string][]string{}
	h, err := idemkinesis.New(g, func(_ context.Context, r events.KinesisEventRecord) error {
		var e outbox.Envelope
		if err := json.Unmarshal(r.Kinesis.Data, &e); err != nil {
			return err
		}
		mu.Lock()
		order[e.OrderingKey] = append(order[e.OrderingKey], e.IdempotencyKey)
		mu.Unlock()
		eff.apply(e.IdempotencyKey)
		return nil
	}, idemkinesis.WithKeyJMESPath(outbox.EnvelopeKey))
	require.NoError(t, err)
	p, err := esm.New(src, h.Handle, esm.WithReportBatchItemFailures(), esm.WithBatchSize(5))
	require.NoError(t, err)
	r, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Check())

	want := map[string]int{}
	wantOrder := map[string][]string{}
	for _, m := range msgs {
		want[m.ID] = 1
		wantOrder[m.OrderingKey] = append(wantOrder[m.OrderingKey], m.ID)
	}
	assert.Equal(t, want, eff.snapshot(), "every event once, its republished copy skipped")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, wantOrder, order, "each ordering key's events in order")
}
