package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// deadlineIn returns a context whose deadline is d from now on clock, or, for a d of zero,
// one without a deadline. A simulated clock runs far ahead of the wall clock, so only the
// clock ever reaches such a deadline; the guard compares deadlines with its clock's time.
func deadlineIn(t *testing.T, clock idem.Clock, d time.Duration) context.Context {
	t.Helper()
	if d == 0 {
		return context.Background()
	}
	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(d))
	t.Cleanup(cancel)
	return ctx
}

// holdKey makes g claim key and hold it in a handler until the test ends; the test's
// cleanup lets the handler return and waits for its completion.
func holdKey(t *testing.T, g *idem.Guard, key string) {
	t.Helper()
	release, claimed, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: key}, func(context.Context) (int, error) {
			close(claimed)
			<-release
			return 1, nil
		})
	}()
	<-claimed
	t.Cleanup(func() { close(release); <-done })
}
