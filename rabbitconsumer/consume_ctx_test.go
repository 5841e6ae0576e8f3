package rabbitconsumer_test

import (
	"context"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// Consume with a context that has already ended returns nil, as it does when the context
// ends while it consumes.
func TestConsumeWithEndedContext(t *testing.T) {
	queue, _ := declare(t)
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(context.Context, amqp.Delivery) error { return nil })
	require.NoError(t, err)
	_, ch := channel(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.NoError(t, c.Consume(ctx, ch))
}
