package storetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
)

// The clock family: each is an idem.Clock whose time the test sets, and each names how it
// waits.
var (
	_ idem.Clock = (*storetest.SettableClock)(nil)
	_ idem.Clock = (*storetest.SimulatedClock)(nil)
	_ idem.Clock = storetest.SkewedClock{}
)

func TestSettableClock(t *testing.T) {
	t.Parallel()
	c := storetest.NewSettableClock()
	start := c.Now()
	assert.True(t, start.After(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)), "starts in the future: TTL deletes nothing")
	c.Advance(time.Minute)
	assert.Equal(t, start.Add(time.Minute), c.Now())
	c.Set(start)
	assert.Equal(t, start, c.Now())
	select {
	case <-c.After(0): // waits in wall time: zero fires at once
	case <-time.After(10 * time.Second):
		require.Fail(t, "After(0) did not fire")
	}
}

func TestSimulatedClock(t *testing.T) {
	t.Parallel()
	c := storetest.NewSimulatedClock()
	assert.Equal(t, storetest.NewSettableClock().Now(), c.Now(), "both start at the same instant")
	start := c.Now()
	fired := c.After(time.Second)
	c.Advance(999 * time.Millisecond)
	select {
	case <-fired:
		require.Fail(t, "fired before its time")
	default:
	}
	c.Advance(time.Millisecond)
	select {
	case at := <-fired:
		assert.Equal(t, start.Add(time.Second), at)
	default:
		require.Fail(t, "did not fire once its time came")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	next := c.After(time.Hour)
	require.True(t, c.WaitAfterCalls(ctx, 2))
	require.True(t, c.AdvanceToNext(ctx))
	assert.Equal(t, start.Add(time.Second+time.Hour), <-next)
}

func TestSkewedClock(t *testing.T) {
	t.Parallel()
	base := storetest.NewSimulatedClock()
	ahead := storetest.SkewedClock{Base: base, Offset: time.Second}
	behind := storetest.SkewedClock{Base: base, Offset: -time.Second}
	assert.Equal(t, base.Now().Add(time.Second), ahead.Now())
	assert.Equal(t, base.Now().Add(-time.Second), behind.Now())
	fired := ahead.After(time.Minute) // waits on the base clock
	base.Advance(time.Minute)
	select {
	case <-fired:
	default:
		require.Fail(t, "the skewed clock's timer did not fire with its base")
	}
}
