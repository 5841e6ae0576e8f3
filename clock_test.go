package idem_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem"
)

func TestClockFunc(t *testing.T) {
	t.Parallel()
	at := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	c := idem.ClockFunc(func() time.Time { return at })
	assert.Equal(t, at, c.Now())
	select {
	case <-c.After(0):
	case <-time.After(time.Minute):
		t.Fatal("After(0) did not fire")
	}
}
