package rabbitconsumer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// The prefetch bounds the work in hand and is used whole: with slow handlers, as many run
// at once as the prefetch allows, however the deliveries arrived in batches, and never
// more.
func TestPrefetchBoundsWorkInHand(t *testing.T) {
	const prefetch = 3
	queue, _ := declare(t)
	var msgs []amqp.Publishing
	for i := range 4 * prefetch {
		msgs = append(msgs, message(fmt.Sprint("w", i)))
	}
	publish(t, queue, msgs...)
	var (
		mu                sync.Mutex
		inFlight, maxSeen int
	)
	release := make(chan struct{})
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(_ context.Context, d amqp.Delivery) error {
		mu.Lock()
		inFlight++
		maxSeen = max(maxSeen, inFlight)
		mu.Unlock()
		<-release
		fx.add(d.MessageId)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil
	}, rabbitconsumer.WithPrefetch(prefetch))
	require.NoError(t, err)
	_, stop := consume(t, c)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before stop, which waits for the handlers
	eventually(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inFlight == prefetch
	}, "%d handlers at once", prefetch)
	time.Sleep(200 * time.Millisecond) // room for a delivery beyond the prefetch to show
	unblock()
	eventually(t, time.Minute, func() bool { return fx.total() == 4*prefetch }, "all processed")
	stop()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, prefetch, maxSeen)
}
