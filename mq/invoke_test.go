package mq_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/mq"
)

// load reads testdata/name.json into v.
func load(t testing.TB, name string, v any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, v))
}

// invoke sends ev through the Lambda runtime's JSON handler, as Lambda would, with the
// deadline of an invocation that has just begun, and returns the handler's error.
func invoke[E any](t testing.TB, handle func(context.Context, E) error, ev E) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	payload, err := json.Marshal(ev)
	require.NoError(t, err)
	_, err = lambda.NewHandler(handle).Invoke(ctx, payload)
	return err
}

// lambdaContext returns a context with the deadline of an invocation that has just begun.
func lambdaContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// ledger applies each message's event, counting runs per event ID in order, and fails the
// events named in fail.
type ledger struct {
	mu      sync.Mutex
	applied map[string]int
	order   []string
	fail    map[string]bool
}

func (l *ledger) apply(data string) error {
	b, err := mq.Data(data)
	if err != nil {
		return err
	}
	var c struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail[c.EventID] {
		return errors.New("downstream unavailable")
	}
	if l.applied == nil {
		l.applied = map[string]int{}
	}
	l.applied[c.EventID]++
	l.order = append(l.order, c.EventID)
	return nil
}

func (l *ledger) heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail = nil
}

func (l *ledger) active(_ context.Context, m events.ActiveMQMessage) error { return l.apply(m.Data) }
func (l *ledger) rabbit(_ context.Context, m events.RabbitMQMessage) error { return l.apply(m.Data) }

func statuses(rep *mq.Report) []string {
	var out []string
	for _, o := range rep.Outcomes {
		out = append(out, string(o.Status)+"/"+string(o.Reason))
	}
	return out
}

// TestActiveMQFixture: aws-lambda-go's own ActiveMQ event runs through the Lambda runtime,
// keyed by its messageID; delivered again, it replays.
func TestActiveMQFixture(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "fixture")
	require.NoError(t, err)
	var got []string
	h, err := mq.NewActiveMQ(g, func(_ context.Context, m events.ActiveMQMessage) error {
		b, err := mq.Data(m.Data)
		got = append(got, string(b))
		return err
	})
	require.NoError(t, err)
	var ev events.ActiveMQEvent
	load(t, "activemq-aws-lambda-go", &ev)
	require.NoError(t, invoke(t, h.Handle, ev))
	assert.Equal(t, []string{"Enter some text here for the message body..."}, got)
	rep := h.Process(lambdaContext(t), ev)
	assert.Equal(t, []string{"replayed/"}, statuses(rep))
	assert.Equal(t, ev.Messages[0].MessageID, rep.Outcomes[0].Key)
	assert.Len(t, got, 1)
}

// TestActiveMQAllOrNothing: e2 fails, so e3 after it does not start and the batch fails
// with e1 recorded; the broker's redelivery of the batch replays e1 and runs e2 and e3 in
// order: each message once.
func TestActiveMQAllOrNothing(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "orders")
	require.NoError(t, err)
	l := &ledger{fail: map[string]bool{"e2": true}}
	h, err := mq.NewActiveMQ(g, l.active)
	require.NoError(t, err)
	var ev events.ActiveMQEvent
	load(t, "activemq-three-messages", &ev)
	require.Error(t, invoke(t, h.Handle, ev), "the runtime reports the error, so the batch is redelivered")
	rep := h.Process(lambdaContext(t), ev)
	assert.Equal(t, []string{"replayed/", "failed/handler", "failed/group_stopped"}, statuses(rep))
	err = rep.Err()
	require.ErrorIs(t, err, mq.ErrBatchFailed)
	assert.Contains(t, err.Error(), ev.Messages[1].MessageID)
	assert.Equal(t, map[string]int{"e1": 1}, l.applied)

	l.heal()
	ev.Messages[0].Redelivered, ev.Messages[1].Redelivered, ev.Messages[2].Redelivered = true, true, true
	require.NoError(t, invoke(t, h.Handle, ev))
	assert.Equal(t, map[string]int{"e1": 1, "e2": 1, "e3": 1}, l.applied)
	assert.Equal(t, []string{"e1", "e2", "e3"}, l.order)
}

// TestActiveMQDuplicateInBatch: one message delivered twice in a batch runs once.
func TestActiveMQDuplicateInBatch(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "orders")
	require.NoError(t, err)
	l := &ledger{}
	h, err := mq.NewActiveMQ(g, l.active)
	require.NoError(t, err)
	var ev events.ActiveMQEvent
	load(t, "activemq-three-messages", &ev)
	ev.Messages = append(ev.Messages, ev.Messages[0])
	rep := h.Process(lambdaContext(t), ev)
	require.NoError(t, rep.Err())
	assert.Equal(t, []string{"ran/", "ran/", "ran/", "duplicate/"}, statuses(rep))
	assert.Equal(t, map[string]int{"e1": 1, "e2": 1, "e3": 1}, l.applied)
}

// TestRabbitMQFixture: aws-lambda-go's own RabbitMQ event has no messageId, so by default
// its message fails with a clear error rather than run unguarded, and the batch fails; a
// key from the data runs it.
func TestRabbitMQFixture(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "fixture")
	require.NoError(t, err)
	runs := 0
	fn := func(context.Context, events.RabbitMQMessage) error { runs++; return nil }
	h, err := mq.NewRabbitMQ(g, fn)
	require.NoError(t, err)
	var ev events.RabbitMQEvent
	load(t, "rabbitmq-aws-lambda-go", &ev)
	require.Error(t, invoke(t, h.Handle, ev))
	rep := h.Process(lambdaContext(t), ev)
	assert.Equal(t, []string{"failed/key"}, statuses(rep))
	require.ErrorIs(t, rep.Outcomes[0].Err, mq.ErrMissingMessageID)
	assert.Equal(t, "test::/#0", rep.Outcomes[0].ID)
	assert.Zero(t, runs)

	byData := func(m events.RabbitMQMessage) (string, error) {
		b, err := mq.Data(m.Data)
		if err != nil {
			return "", err
		}
		var v struct {
			Data string `json:"data"`
		}
		return v.Data, json.Unmarshal(b, &v)
	}
	h, err = mq.NewRabbitMQ(g, fn, mq.WithRabbitMQKey(byData))
	require.NoError(t, err)
	require.NoError(t, invoke(t, h.Handle, ev))
	assert.Equal(t, 1, runs)
	rep = h.Process(lambdaContext(t), ev)
	assert.Equal(t, []string{"replayed/"}, statuses(rep))
	assert.Equal(t, "CZrmf0Gw8Ov4bqLQxD4E", rep.Outcomes[0].Key)
}

// TestRabbitMQAllOrNothing: as for ActiveMQ, a failure stops the batch in queue order and
// fails it with the finished messages recorded; the redelivery replays them.
func TestRabbitMQAllOrNothing(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "orders")
	require.NoError(t, err)
	l := &ledger{fail: map[string]bool{"e2": true}}
	h, err := mq.NewRabbitMQ(g, l.rabbit)
	require.NoError(t, err)
	var ev events.RabbitMQEvent
	load(t, "rabbitmq-three-messages", &ev)
	err = h.Handle(lambdaContext(t), ev)
	require.ErrorIs(t, err, mq.ErrBatchFailed)
	assert.Contains(t, err.Error(), "msg-e2")
	assert.Equal(t, map[string]int{"e1": 1}, l.applied)

	l.heal()
	require.NoError(t, invoke(t, h.Handle, ev))
	rep := h.Process(lambdaContext(t), ev)
	assert.Equal(t, []string{"replayed/", "replayed/", "replayed/"}, statuses(rep))
	assert.Equal(t, map[string]int{"e1": 1, "e2": 1, "e3": 1}, l.applied)
	assert.Equal(t, []string{"e1", "e2", "e3"}, l.order)
}

// TestRabbitMQMissingKeyStopsTheBatch: a message without a messageId, mid-queue, fails
// without running, and the messages after it do not start.
func TestRabbitMQMissingKeyStopsTheBatch(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "orders")
	require.NoError(t, err)
	l := &ledger{}
	h, err := mq.NewRabbitMQ(g, l.rabbit)
	require.NoError(t, err)
	var ev events.RabbitMQEvent
	load(t, "rabbitmq-three-messages", &ev)
	ev.MessagesByQueue["orders::/"][1].BasicProperties.MessageID = nil
	rep := h.Process(lambdaContext(t), ev)
	assert.Equal(t, []string{"ran/", "failed/key", "failed/group_stopped"}, statuses(rep))
	assert.Equal(t, "orders::/#1", rep.Outcomes[1].ID)
	require.ErrorIs(t, rep.Err(), mq.ErrMissingMessageID)
	assert.Equal(t, map[string]int{"e1": 1}, l.applied)
}

// TestOptions: invalid settings fail the constructors with an error naming the option,
// and a key option of the other broker is refused.
func TestOptions(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "options")
	require.NoError(t, err)
	active := func(context.Context, events.ActiveMQMessage) error { return nil }
	rabbit := func(context.Context, events.RabbitMQMessage) error { return nil }
	for _, tc := range []struct {
		name string
		opt  mq.Option
	}{
		{"WithActiveMQKey", mq.WithActiveMQKey(nil)},
		{"WithRabbitMQKey", mq.WithRabbitMQKey(nil)},
		{"WithDeadlineMargin", mq.WithDeadlineMargin(-time.Second)},
	} {
		_, err := mq.NewActiveMQ(g, active, tc.opt)
		require.ErrorIs(t, err, idem.ErrInvalidOption, tc.name)
		assert.Contains(t, err.Error(), tc.name)
		_, err = mq.NewRabbitMQ(g, rabbit, tc.opt)
		require.ErrorIs(t, err, idem.ErrInvalidOption, tc.name)
		assert.Contains(t, err.Error(), tc.name)
	}
	_, err = mq.NewActiveMQ(g, active, mq.WithRabbitMQKey(mq.RabbitMQMessageID))
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithRabbitMQKey")
	_, err = mq.NewRabbitMQ(g, rabbit, mq.WithActiveMQKey(mq.ActiveMQMessageID))
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	_, err = mq.NewActiveMQ(nil, active)
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	_, err = mq.NewRabbitMQ(g, nil)
	require.ErrorIs(t, err, idem.ErrInvalidOption)
}
