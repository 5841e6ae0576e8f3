package idem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// lateCheckpoints is a store whose first checkpoint write of each key arrives twice: at
// once (the SDK's resend, which succeeds) and again right after the key's second
// checkpoint write applied (the first attempt, delayed in the network).
type lateCheckpoints struct {
	*memstore.Store
	mu    sync.Mutex
	first map[string]func()
	sent  map[string]int
}

func (s *lateCheckpoints) SetCheckpoint(ctx context.Context, key, token, checkpoint string, seq int64) error {
	s.mu.Lock()
	s.sent[key]++
	n := s.sent[key]
	if n == 1 {
		s.first[key] = func() { _ = s.Store.SetCheckpoint(context.Background(), key, token, checkpoint, seq) }
	}
	late := s.first[key]
	s.mu.Unlock()
	err := s.Store.SetCheckpoint(ctx, key, token, checkpoint, seq)
	if n == 2 {
		late()
	}
	return err
}

// TestLateCheckpointNeverReplacesALaterOne: Checkpoint("charged") is resent, and its first
// attempt lands after Checkpoint("shipped"); the owner then crashes. The next owner must
// resume from "shipped", the last checkpoint the first owner was told was recorded, or it
// ships a second time. The first owner fails after both, so the retry resumes at once.
func TestLateCheckpointNeverReplacesALaterOne(t *testing.T) {
	t.Parallel()
	s := &lateCheckpoints{Store: memstore.New(), first: map[string]func(){}, sent: map[string]int{}}
	clock := storetest.NewSettableClock()
	g, err := idem.New(s, "ship", idem.WithClock(clock), idem.WithLease(time.Minute))
	require.NoError(t, err)
	req := idem.Request{Key: "order-1"}

	_, _, err = idem.Do(context.Background(), g, req, func(ctx context.Context) (string, error) {
		require.NoError(t, idem.Checkpoint(ctx, "charged"))
		require.NoError(t, idem.Checkpoint(ctx, "shipped"))
		return "", errCarrierDown // fails: the key is released with its checkpoint
	})
	require.ErrorIs(t, err, errCarrierDown)

	sk, err := g.StoredKey(req)
	require.NoError(t, err)
	rec, err := s.Get(context.Background(), sk)
	require.NoError(t, err)
	require.NotNil(t, rec)
	assert.Equal(t, "shipped", rec.Checkpoint, "the stored checkpoint")

	v, _, err := idem.Do(context.Background(), g, req, func(ctx context.Context) (string, error) {
		return idem.LastCheckpoint(ctx), nil
	})
	require.NoError(t, err)
	assert.Equal(t, "shipped", v, "the next owner resumes from the last checkpoint recorded")
}

var errCarrierDown = errors.New("carrier down")

var _ idemstore.Store = (*lateCheckpoints)(nil)

// orderedCheckpoints is a store that records the numbers of checkpoint writes and counts
// writes in flight at once.
type orderedCheckpoints struct {
	*memstore.Store
	mu       sync.Mutex
	seqs     []int64
	inFlight int
	overlaps int
}

func (s *orderedCheckpoints) SetCheckpoint(ctx context.Context, key, token, checkpoint string, seq int64) error {
	s.mu.Lock()
	s.inFlight++
	if s.inFlight > 1 {
		s.overlaps++
	}
	s.seqs = append(s.seqs, seq)
	s.mu.Unlock()
	time.Sleep(time.Millisecond) // let another call try to overlap
	err := s.Store.SetCheckpoint(ctx, key, token, checkpoint, seq)
	s.mu.Lock()
	s.inFlight--
	s.mu.Unlock()
	return err
}

// TestConcurrentCheckpointsAreSentInOrder: checkpoints a handler records from several
// goroutines are sent one at a time, numbered 1, 2, 3, ... in the order sent, so none is
// refused as late and the stored checkpoint is the one LastCheckpoint reports.
func TestConcurrentCheckpointsAreSentInOrder(t *testing.T) {
	t.Parallel()
	s := &orderedCheckpoints{Store: memstore.New()}
	g, err := idem.New(s, "ship")
	require.NoError(t, err)
	req := idem.Request{Key: "order-2"}
	const n = 16
	last, _, err := idem.Do(context.Background(), g, req, func(ctx context.Context) (string, error) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NoError(t, idem.Checkpoint(ctx, fmt.Sprintf("step-%d", i)))
			}()
		}
		wg.Wait()
		return idem.LastCheckpoint(ctx), nil
	})
	require.NoError(t, err)

	assert.Zero(t, s.overlaps, "checkpoint writes of one lease overlapped")
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i + 1)
	}
	assert.Equal(t, want, s.seqs)
	sk, err := g.StoredKey(req)
	require.NoError(t, err)
	rec, err := s.Get(context.Background(), sk)
	require.NoError(t, err)
	assert.Equal(t, last, rec.Checkpoint)
	assert.Equal(t, int64(n), rec.CheckpointSeq)
}
