package kafkaconsumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemkit/idem/memstore"
)

// TestCloseWaitsForTheBatch: Close during a batch returns only once the batch has finished
// and its offsets are committed.
func TestCloseWaitsForTheBatch(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1)
	recs := k.produce(0, 3, func(int) string { return "a" })
	l := newLedger()
	started, release := make(chan struct{}), make(chan struct{})
	c := newConsumer(t, k, memstore.New(), "g", nil, func(_ context.Context, r *kgo.Record) error {
		if r.Offset == 1 {
			close(started)
			<-release
		}
		l.apply(r)
		return nil
	}, nil)
	polled := make(chan error, 1)
	go func() {
		_, err := c.Poll(context.Background())
		polled <- err
	}()
	<-started
	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a batch ran")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	<-closed
	require.NoError(t, <-polled)
	l.assertOnce(t, recs)
	assert.Equal(t, map[int32]int64{0: 3}, k.committed("g"))
}
