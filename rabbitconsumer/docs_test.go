package rabbitconsumer_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The WARN line of a dead-lettered message carries its message ID and its stored key (the
// scoped hash idemctl finds the record by), never its body, as New's doc says.
func TestDeadLetterLineCarriesMessageIDAndStoredKey(t *testing.T) {
	queue, dlq := declare(t)
	var logs syncBuffer
	guard := newGuard(t, memstore.New(), idem.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	c, err := rabbitconsumer.New(guard, queue, func(context.Context, amqp.Delivery) error {
		return errors.New("declined")
	}, rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter))
	require.NoError(t, err)
	publish(t, queue, message("logged-1"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return ready(t, dlq) == 1 }, "dead-lettered")
	stop()
	stored, err := guard.StoredKey(idem.Request{Key: "logged-1"})
	require.NoError(t, err)
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "message dead-lettered") {
			line = l
		}
	}
	require.NotEmpty(t, line, "no dead-letter line in:\n%s", logs.String())
	assert.Contains(t, line, "message_id=logged-1")
	assert.Contains(t, line, "stored_key="+stored)
	assert.NotContains(t, line, "body-logged-1")
}

// A guard that fails open runs a message whose claim meets a store failure unguarded and
// acknowledges it, instead of putting it back, as the package doc warns.
func TestFailOpenRunsUnguarded(t *testing.T) {
	queue, dlq := declare(t)
	store := storetest.NewFaulty(memstore.New())
	store.Fail("claim", errors.New("connection refused"), false)
	fx := newEffects()
	var seen batches
	c, err := rabbitconsumer.New(newGuard(t, store, idem.WithFailOpen(true), idem.WithHooks(seen.hooks())), queue,
		func(_ context.Context, d amqp.Delivery) error {
			fx.add(d.MessageId)
			return nil
		})
	require.NoError(t, err)
	publish(t, queue, message("open-1"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return seen.settled() == 1 }, "acknowledged")
	stop()
	drained(t, queue)
	drained(t, dlq)
	assert.Equal(t, 1, fx.get("open-1"), "ran unguarded while the store was down")
}
