package rabbitconsumer_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// A Config with amqp091-go's automatic recovery is refused: a recovered channel reuses
// delivery tags.
func TestWithAMQPConfigRefusesRecovery(t *testing.T) {
	_, err := rabbitconsumer.New(newGuard(t, memstore.New()), "q",
		func(context.Context, amqp.Delivery) error { return nil },
		rabbitconsumer.WithAMQPConfig(amqp.Config{Recovery: &amqp.Recovery{}}))
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	assert.Contains(t, err.Error(), "Recovery")
}

// Consume on a channel the caller opened on a connection with automatic recovery: once the
// connection is lost, Consume settles nothing of the lost channel (the broker requeued
// those deliveries) and returns ErrChannelClosed, even though amqp091-go reopens the
// channel and subscribes again. Without that, A's ack, sent after the recovery, takes
// delivery tag 1 of the reopened channel: B, another message, whose own handler then
// fails, and B is lost.
func TestConsumeSettlesNothingOfALostChannelThatRecovers(t *testing.T) {
	queue, dlq := declare(t)
	u, err := url.Parse(brokerURL(t))
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	redial := make(chan struct{})
	dialer := func(network, _ string) (net.Conn, error) {
		mu.Lock()
		first := len(conns) == 0
		mu.Unlock()
		if !first {
			<-redial
		}
		c, err := net.DialTimeout(network, u.Host, 10*time.Second)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}
	conn, err := amqp.DialConfig(brokerURL(t), amqp.Config{Dial: dialer, Recovery: &amqp.Recovery{
		ReconnectionConfig: &amqp.ReconnectionConfig{MaxRetryCount: 1000, RetryInterval: 50 * time.Millisecond},
	}})
	require.NoError(t, err)
	ch, err := conn.Channel()
	require.NoError(t, err)
	startedA := make(chan struct{}, 1)
	releaseA, releaseB := make(chan struct{}), make(chan struct{})
	var seen batches
	c, err := rabbitconsumer.New(newGuard(t, memstore.New(), idem.WithHooks(seen.hooks())), queue,
		func(_ context.Context, d amqp.Delivery) error {
			if d.MessageId == "A" {
				startedA <- struct{}{}
				<-releaseA
				return nil
			}
			<-releaseB
			return errors.New("declined")
		},
		rabbitconsumer.WithPrefetch(1), rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Consume(ctx, ch) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			for _, c := range []chan struct{}{releaseA, releaseB, redial} {
				select {
				case <-c:
				default:
					close(c)
				}
			}
			_ = conn.Close()
		})
	}
	defer stop()
	publish(t, queue, message("A"))
	<-startedA

	// R takes A once the broker requeues it, and never acks.
	_, rch := channel(t)
	require.NoError(t, rch.Qos(1, 0, false))
	rdeliveries, err := rch.Consume(queue, "", false, false, false, false, nil)
	require.NoError(t, err)
	mu.Lock()
	_ = conns[0].Close()
	mu.Unlock()
	select {
	case d := <-rdeliveries:
		require.Equal(t, "A", d.MessageId)
	case <-time.After(30 * time.Second):
		t.Fatal("A was not requeued to R")
	}
	close(redial)
	eventually(t, 30*time.Second, func() bool { return subscribed(t, queue) == 2 },
		"amqp091's recovery did not subscribe the consumer again")
	publish(t, queue, message("B"))
	eventually(t, 30*time.Second, func() bool { return ready(t, queue) == 0 },
		"B was not delivered to the recovered channel")
	close(releaseA) // A's batch finishes: its tag is of the lost channel
	eventually(t, 30*time.Second, func() bool { return seen.last() != "" }, "A's batch did not finish")
	time.Sleep(time.Second) // let a stale settlement of A reach the broker before B fails
	close(releaseB)
	var cerr error
	select {
	case cerr = <-done:
	case <-time.After(10 * time.Second):
		cancel() // it did not see the channel lost: stop it
		t.Logf("Consume returned %v once stopped", <-done)
		cerr = errors.New("went on consuming on the recovered channel")
	}
	require.NoError(t, conn.Close()) // the caller closes: what it holds goes back to the queue
	assert.ErrorIs(t, cerr, rabbitconsumer.ErrChannelClosed, "Consume did not see the lost channel")
	inQueue, inDLQ := ready(t, queue), ready(t, dlq)
	assert.Equal(t, 1, inQueue+inDLQ, "B is lost: a stale ack of A acknowledged it")
}
