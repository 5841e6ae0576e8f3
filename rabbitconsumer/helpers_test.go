package rabbitconsumer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// dial opens a connection to the test binary's broker, closed when tb ends.
func dial(tb testing.TB) *amqp.Connection {
	tb.Helper()
	conn, err := amqp.Dial(brokerURL(tb))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

// channel opens a channel on a connection of its own.
func channel(tb testing.TB) (*amqp.Connection, *amqp.Channel) {
	tb.Helper()
	conn := dial(tb)
	ch, err := conn.Channel()
	require.NoError(tb, err)
	return conn, ch
}

// queueName returns a queue name of tb's own.
func queueName(tb testing.TB) string {
	return strings.NewReplacer("/", "-", " ", "-").Replace(tb.Name()) + fmt.Sprintf("-%d", time.Now().UnixNano())
}

// declare declares a durable queue of tb's own, with a dead-letter queue (its name plus
// ".dlq") that its rejected messages go to, and returns both names.
func declare(tb testing.TB) (queue, dlq string) {
	tb.Helper()
	_, ch := channel(tb)
	queue = queueName(tb)
	dlq = queue + ".dlq"
	_, err := ch.QueueDeclare(dlq, true, false, false, false, nil)
	require.NoError(tb, err)
	_, err = ch.QueueDeclare(queue, true, false, false, false, amqp.Table{
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq,
	})
	require.NoError(tb, err)
	return queue, dlq
}

// publish publishes msgs to queue, persistent, and waits for the broker's confirms.
func publish(tb testing.TB, queue string, msgs ...amqp.Publishing) {
	tb.Helper()
	_, ch := channel(tb)
	require.NoError(tb, ch.Confirm(false))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var confirms []*amqp.DeferredConfirmation
	for _, m := range msgs {
		m.DeliveryMode = amqp.Persistent
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false, m)
		require.NoError(tb, err)
		confirms = append(confirms, dc)
	}
	for _, dc := range confirms {
		ok, err := dc.WaitContext(ctx)
		require.NoError(tb, err)
		require.True(tb, ok, "the broker nacked a publish")
	}
}

// message returns a publishing with message ID id and body "body-<id>".
func message(id string) amqp.Publishing {
	return amqp.Publishing{MessageId: id, Body: []byte("body-" + id)}
}

// ready returns how many messages of queue are ready (neither delivered nor held).
func ready(tb testing.TB, queue string) int {
	tb.Helper()
	return inspect(tb, queue).Messages
}

// subscribed returns how many consumers queue has.
func subscribed(tb testing.TB, queue string) int {
	tb.Helper()
	return inspect(tb, queue).Consumers
}

// inspect returns queue's counts, on a connection of its own closed at once.
func inspect(tb testing.TB, queue string) amqp.Queue {
	tb.Helper()
	conn, err := amqp.Dial(brokerURL(tb))
	require.NoError(tb, err)
	defer func() { _ = conn.Close() }()
	ch, err := conn.Channel()
	require.NoError(tb, err)
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	require.NoError(tb, err)
	return q
}

// drained waits until queue has no message left, ready or unacknowledged: it consumes
// nothing, and checks once the consumers have stopped (their channels closed requeue what
// they did not acknowledge).
func drained(tb testing.TB, queue string) {
	tb.Helper()
	require.Equal(tb, 0, ready(tb, queue), "messages left in %s", queue)
}

// effects counts the business effects of each key: what must happen at most once.
type effects struct {
	mu     sync.Mutex
	counts map[string]int
	starts map[string]int
}

func newEffects() *effects {
	return &effects{counts: map[string]int{}, starts: map[string]int{}}
}

func (e *effects) start(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.starts[key]++
}

func (e *effects) add(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.counts[key]++
}

func (e *effects) get(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[key]
}

func (e *effects) started(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.starts[key]
}

func (e *effects) total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.counts {
		n += c
	}
	return n
}

// eventually polls cond every 20 ms until it holds, failing tb after timeout.
func eventually(tb testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: "+msg, append([]any{timeout}, args...)...)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// batches collects the items of the batches a guard's OnBatch hook reports.
type batches struct {
	mu    sync.Mutex
	items []idem.BatchItem
}

func (b *batches) hooks() idem.Hooks {
	return idem.Hooks{OnBatch: func(_ context.Context, ev idem.BatchEvent) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.items = append(b.items, ev.Items...)
	}}
}

// last returns the status of the last item reported, "" before any.
func (b *batches) last() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.items) == 0 {
		return ""
	}
	return b.items[len(b.items)-1].Status
}

// settled counts the items reported that the consumer acknowledged.
func (b *batches) settled() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, it := range b.items {
		if it.Status != "failed" {
			n++
		}
	}
	return n
}

// failed returns the failed items reported so far with reason.
func (b *batches) failed(reason string) []idem.BatchItem {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []idem.BatchItem
	for _, it := range b.items {
		if it.Status == "failed" && it.Reason == reason {
			out = append(out, it)
		}
	}
	return out
}

// consume runs c.Consume on a channel of a connection of its own, in a goroutine, until
// the returned stop is called (or tb ends); stop waits for Consume to return, and closes
// the channel.
func consume(tb testing.TB, c interface {
	Consume(context.Context, *amqp.Channel) error
}) (conn *amqp.Connection, stop func()) {
	tb.Helper()
	conn, ch := channel(tb)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Consume(ctx, ch)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			_ = ch.Close()
		})
	}
	tb.Cleanup(stop)
	return conn, stop
}
