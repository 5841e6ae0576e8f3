package mq_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/mq"
)

// load reads testdata/name.json into v.
func load[E any](t testing.TB, name string, v *E) {
	t.Helper()
	*v = adaptertest.Load[E](t, name)
}

// invoke sends ev through the Lambda runtime's JSON handler, as Lambda would, and returns
// the handler's error.
func invoke[E any](t testing.TB, handle func(context.Context, E) error, ev E) error {
	t.Helper()
	_, err := adaptertest.Invoke(t, context.Background(), handle, ev)
	return err
}

// ledger applies each message's event (see adaptertest.Ledger).
type ledger struct{ *adaptertest.Ledger }

func newLedger(fail ...string) *ledger { return &ledger{adaptertest.NewLedger(fail...)} }

func (l *ledger) apply(data string) error {
	b, err := mq.Data(data)
	if err != nil {
		return err
	}
	return l.Apply(b)
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
	rep := h.Process(adaptertest.Context(t), ev)
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
	l := newLedger("e2")
	h, err := mq.NewActiveMQ(g, l.active)
	require.NoError(t, err)
	var ev events.ActiveMQEvent
	load(t, "activemq-three-messages", &ev)
	require.Error(t, invoke(t, h.Handle, ev), "the runtime reports the error, so the batch is redelivered")
	rep := h.Process(adaptertest.Context(t), ev)
	assert.Equal(t, []string{"replayed/", "failed/handler", "failed/group_stopped"}, statuses(rep))
	err = rep.Err()
	require.ErrorIs(t, err, mq.ErrBatchFailed)
	assert.Contains(t, err.Error(), ev.Messages[1].MessageID)
	assert.Equal(t, map[string]int{"e1": 1}, l.Applied)

	l.Heal()
	ev.Messages[0].Redelivered, ev.Messages[1].Redelivered, ev.Messages[2].Redelivered = true, true, true
	require.NoError(t, invoke(t, h.Handle, ev))
	assert.Equal(t, map[string]int{"e1": 1, "e2": 1, "e3": 1}, l.Applied)
	assert.Equal(t, []string{"e1", "e2", "e3"}, l.Order)
}

// TestActiveMQDuplicateInBatch: one message delivered twice in a batch runs once.
func TestActiveMQDuplicateInBatch(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "orders")
	require.NoError(t, err)
	l := newLedger()
	h, err := mq.NewActiveMQ(g, l.active)
	require.NoError(t, err)
	var ev events.ActiveMQEvent
	load(t, "activemq-three-messages", &ev)
	ev.Messages = append(ev.Messages, ev.Messages[0])
	rep := h.Process(adaptertest.Context(t), ev)
	require.NoError(t, rep.Err())
	assert.Equal(t, []string{"ran/", "ran/", "ran/", "duplicate/"}, statuses(rep))
	assert.Equal(t, map[string]int{"e1": 1, "e2": 1, "e3": 1}, l.Applied)
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
	rep := h.Process(adaptertest.Context(t), ev)
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
	rep = h.Process(adaptertest.Context(t), ev)
	assert.Equal(t, []string{"replayed/"}, statuses(rep))
	assert.Equal(t, "CZrmf0Gw8Ov4bqLQxD4E", rep.Outcomes[0].Key)
}

// TestRabbitMQAllOrNothing: as for ActiveMQ, a failure stops the batch in queue order and
// fails it with the finished messages recorded; the redelivery replays them.
func TestRabbitMQAllOrNothing(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "orders")
	require.NoError(t, err)
	l := newLedger("e2")
	h, err := mq.NewRabbitMQ(g, l.rabbit)
	require.NoError(t, err)
	var ev events.RabbitMQEvent
	load(t, "rabbitmq-three-messages", &ev)
	err = h.Handle(adaptertest.Context(t), ev)
	require.ErrorIs(t, err, mq.ErrBatchFailed)
	assert.Contains(t, err.Error(), "msg-e2")
	assert.Equal(t, map[string]int{"e1": 1}, l.Applied)

	l.Heal()
	require.NoError(t, invoke(t, h.Handle, ev))
	rep := h.Process(adaptertest.Context(t), ev)
	assert.Equal(t, []string{"replayed/", "replayed/", "replayed/"}, statuses(rep))
	assert.Equal(t, map[string]int{"e1": 1, "e2": 1, "e3": 1}, l.Applied)
	assert.Equal(t, []string{"e1", "e2", "e3"}, l.Order)
}

// TestRabbitMQMissingKeyStopsTheBatch: a message without a messageId, mid-queue, fails
// without running, and the messages after it do not start.
func TestRabbitMQMissingKeyStopsTheBatch(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "orders")
	require.NoError(t, err)
	l := newLedger()
	h, err := mq.NewRabbitMQ(g, l.rabbit)
	require.NoError(t, err)
	var ev events.RabbitMQEvent
	load(t, "rabbitmq-three-messages", &ev)
	ev.MessagesByQueue["orders::/"][1].BasicProperties.MessageID = nil
	rep := h.Process(adaptertest.Context(t), ev)
	assert.Equal(t, []string{"ran/", "failed/key", "failed/group_stopped"}, statuses(rep))
	assert.Equal(t, "orders::/#1", rep.Outcomes[1].ID)
	require.ErrorIs(t, rep.Err(), mq.ErrMissingMessageID)
	assert.Equal(t, map[string]int{"e1": 1}, l.Applied)
}

// TestOptions: invalid settings fail the constructors with an error naming the option,
// and a key option of the other broker is refused.
func TestOptions(t *testing.T) {
	t.Parallel()
	active := func(context.Context, events.ActiveMQMessage) error { return nil }
	rabbit := func(context.Context, events.RabbitMQMessage) error { return nil }
	invalid := map[string]mq.Option{
		"WithActiveMQKey":    mq.WithActiveMQKey(nil),
		"WithRabbitMQKey":    mq.WithRabbitMQKey(nil),
		"WithDeadlineMargin": mq.WithDeadlineMargin(-time.Second),
	}
	adaptertest.OptionErrors(t, mq.NewActiveMQ, active, invalid)
	adaptertest.OptionErrors(t, mq.NewRabbitMQ, rabbit, invalid)

	g, err := idem.New(memstore.New(), "options")
	require.NoError(t, err)
	_, err = mq.NewActiveMQ(g, active, mq.WithRabbitMQKey(mq.RabbitMQMessageID))
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithRabbitMQKey")
	_, err = mq.NewRabbitMQ(g, rabbit, mq.WithActiveMQKey(mq.ActiveMQMessageID))
	require.ErrorIs(t, err, idem.ErrInvalidOption)
}
