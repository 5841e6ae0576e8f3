package idem_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem"
)

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
