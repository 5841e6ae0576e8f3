// Package outboxe2e holds what the outbox end-to-end tests (pgoutbox's and ddbrelay's)
// share: the producer runs that must never be delivered (fenced off, rolled back), and the
// check of what reached the SQS queue against what committed.
package outboxe2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/sqspub"
	"github.com/idemkit/idem/sqs"
)

// The event types of the runs that must never be delivered.
const (
	// TypeFencedOff is the event of a run whose lease was taken over.
	TypeFencedOff = "FencedOff"
	// TypeRolledBack is the event of a run that failed.
	TypeRolledBack = "RolledBack"
)

// Record records an event of type typ on ordering key key in the guarded run of ctx, and
// returns its id.
type Record func(ctx context.Context, key, typ string) (string, error)

// FencedOff runs n requests ("fenced-<i>") whose first owner records a [TypeFencedOff]
// event on key, loses its lease (clock advanced by advance, past the guard's lease) and
// completes late, while the new owner records a "Replacement" event, which commits. It
// returns the replacements' ids in commit order.
func FencedOff(t testing.TB, ctx context.Context, g *idem.Guard, clock *storetest.SettableClock, advance time.Duration, n int, key string, record Record) []string {
	t.Helper()
	var ids []string
	for i := range n {
		req := idem.Request{Key: fmt.Sprintf("fenced-%d", i)}
		recorded, resume, firstDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			_, _, err := idem.Do(ctx, g, req, func(ctx context.Context) (string, error) {
				_, err := record(ctx, key, TypeFencedOff)
				close(recorded)
				<-resume
				return "", err
			})
			firstDone <- err
		}()
		<-recorded
		clock.Advance(advance)
		_, _, err := idem.Do(ctx, g, req, func(ctx context.Context) (string, error) {
			id, err := record(ctx, key, "Replacement")
			ids = append(ids, id)
			return "", err
		})
		require.NoError(t, err)
		close(resume)
		require.ErrorIs(t, <-firstDone, idem.ErrLeaseLost)
	}
	return ids
}

// RolledBack runs n requests ("failed-<i>") that record a [TypeRolledBack] event on key
// and then fail: the even ones by the handler's error, the odd ones by failAttached, which
// attaches a write that fails at the commit.
func RolledBack(t testing.TB, ctx context.Context, g *idem.Guard, n int, key string, record Record, failAttached func(ctx context.Context) error) {
	t.Helper()
	declined := errors.New("declined")
	for i := range n {
		_, _, err := idem.Do(ctx, g, idem.Request{Key: fmt.Sprintf("failed-%d", i)}, func(ctx context.Context) (string, error) {
			if _, err := record(ctx, key, TypeRolledBack); err != nil {
				return "", err
			}
			if i%2 == 0 {
				return "", declined
			}
			return "", failAttached(ctx)
		})
		require.Error(t, err)
	}
}

// Check checks the messages the queue took (delivered, in order, redeliveries excluded)
// and the consumer's effects (event id → times it took effect) against the events that
// committed (ordering key → ids in commit order): nothing of a fenced-off or rolled-back
// run, nor anything else that did not commit, was delivered; every committed event was,
// each key's first deliveries in commit order; each took effect once. It returns the
// number of deliveries that repeated an event, and the keys whose order failed.
func Check(t testing.TB, delivered []events.SQSMessage, committed map[string][]string, effects map[string]int) (duplicates int, badKeys []string) {
	t.Helper()
	keyOf := map[string]string{}
	for k, ids := range committed {
		for _, id := range ids {
			keyOf[id] = k
		}
	}
	firstSeen := map[string]bool{}
	perKey := map[string][]string{}
	for _, m := range delivered {
		id := aws.ToString(m.MessageAttributes[outbox.IDAttribute].StringValue)
		typ := aws.ToString(m.MessageAttributes[sqspub.TypeAttribute].StringValue)
		require.NotContains(t, []string{TypeFencedOff, TypeRolledBack}, typ, "an event of a fenced-off or rolled-back run")
		k, ok := keyOf[id]
		require.True(t, ok, "delivered event %s was never committed", id)
		if firstSeen[id] {
			duplicates++
			continue
		}
		firstSeen[id] = true
		perKey[k] = append(perKey[k], id)
	}
	assert.Len(t, firstSeen, len(keyOf), "every committed event delivered")
	for k, ids := range committed {
		if !assert.Equal(t, ids, perKey[k], "key %s first delivered in commit order", k) {
			badKeys = append(badKeys, k)
		}
	}
	for id := range keyOf {
		assert.Equal(t, 1, effects[id], "event %s took effect once", id)
	}
	assert.Len(t, effects, len(keyOf))
	return duplicates, badKeys
}

// Consumer is the tests' consumer: sqs.New with default options, so it deduplicates on
// the Idempotency-Key attribute (the event id), counting each event's effects. It is safe
// for concurrent use.
type Consumer struct {
	h       *sqs.Handler
	mu      sync.Mutex
	effects map[string]int
}

// NewConsumer returns a consumer guarded on store under the name "consume".
func NewConsumer(t testing.TB, store idemstore.Store) *Consumer {
	t.Helper()
	g, err := idem.New(store, "consume")
	require.NoError(t, err)
	c := &Consumer{effects: map[string]int{}}
	c.h, err = sqs.New(g, func(_ context.Context, m events.SQSMessage) error {
		id := aws.ToString(m.MessageAttributes[outbox.IDAttribute].StringValue)
		c.mu.Lock()
		c.effects[id]++
		c.mu.Unlock()
		return nil
	})
	require.NoError(t, err)
	return c
}

// Handle is the consumer's Lambda handler.
func (c *Consumer) Handle(ctx context.Context, e events.SQSEvent) (events.SQSEventResponse, error) {
	return c.h.Handle(ctx, e)
}

// Effects returns a copy of the effects so far: event id → times it took effect.
func (c *Consumer) Effects() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.effects)
}
