package ddbrelay

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/outbox"
)

// blockingPub holds its first call until release is closed, and answers every message
// published.
type blockingPub struct {
	started chan struct{}
	release chan struct{}
	calls   [][]outbox.Message
}

func (p *blockingPub) Publish(_ context.Context, msgs []outbox.Message) []error {
	p.calls = append(p.calls, msgs)
	if len(p.calls) == 1 {
		close(p.started)
		<-p.release
	}
	return make([]error, len(msgs))
}

// TestTogetherWaiterHonoursItsContext: an event waiting for the next call while another
// call is in flight returns its context's error, unsent, when that context ends; the call
// after it goes on without it.
func TestTogetherWaiterHonoursItsContext(t *testing.T) {
	t.Parallel()
	pub := &blockingPub{started: make(chan struct{}), release: make(chan struct{})}
	tg := &together{ctx: context.Background(), pub: pub}
	first := make(chan error, 1)
	go func() { first <- tg.publish(context.Background(), outbox.Message{ID: "a-1"}) }()
	<-pub.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := tg.publish(ctx, outbox.Message{ID: "b-1"})
	require.ErrorIs(t, err, context.Canceled)
	close(pub.release)
	require.NoError(t, <-first)
	require.NoError(t, tg.publish(context.Background(), outbox.Message{ID: "c-1"}))
	require.Len(t, pub.calls, 2)
	assert.Equal(t, "c-1", pub.calls[1][0].ID, "b-1 never sent")
	assert.Len(t, pub.calls[1], 1)
}
