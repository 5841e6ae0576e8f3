package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamo/dynamomem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
)

// outboxStore is a store that lists the events it committed.
type outboxStore interface {
	idemstore.Store
	Outbox() []idemstore.OutboxMessage
}

// stores are the in-memory stores users test with, each ready for outbox events.
func stores(t *testing.T) map[string]func() outboxStore {
	t.Helper()
	return map[string]func() outboxStore{
		"memstore": func() outboxStore { return memstore.New() },
		"dynamomem": func() outboxStore {
			s := &dynamomem.Store{OutboxTable: "outbox"}
			_, err := s.CreateTable(context.Background(), dynamo.OutboxTableInput("outbox"))
			require.NoError(t, err)
			return s
		},
	}
}

var errDeclined = errors.New("card declined")

// TestRecordCommitsWithTheCompletion: an event recorded in a guarded handler commits with
// the completion, once: a replay records nothing more, a failed run nothing at all.
func TestRecordCommitsWithTheCompletion(t *testing.T) {
	t.Parallel()
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore()
			g, err := idem.New(s, "pay")
			require.NoError(t, err)
			ctx := context.Background()

			_, _, err = idem.Do(ctx, g, idem.Request{Key: "p-0"}, func(ctx context.Context) (string, error) {
				_, err := outbox.Record(ctx, outbox.Event{Destination: "payments", Type: "PaymentFailed"})
				require.NoError(t, err)
				return "", errDeclined
			})
			require.ErrorIs(t, err, errDeclined)
			assert.Empty(t, s.Outbox(), "a failed run commits no event")

			var ids []string
			pay := func(ctx context.Context) (string, error) {
				for _, typ := range []string{"PaymentTaken", "ReceiptDue"} {
					id, err := outbox.Record(ctx, outbox.Event{
						Destination: "payments", OrderingKey: "acct-1", Type: typ,
						Payload: []byte(`{"cents":100}`), Headers: map[string]string{"tenant": "t1"},
					})
					if err != nil {
						return "", err
					}
					ids = append(ids, id)
				}
				return "ok", nil
			}
			_, _, err = idem.Do(ctx, g, idem.Request{Key: "p-1"}, pay)
			require.NoError(t, err)
			_, replayed, err := idem.Do(ctx, g, idem.Request{Key: "p-1"}, pay)
			require.NoError(t, err)
			require.True(t, replayed)

			sk, err := g.StoredKey(idem.Request{Key: "p-1"})
			require.NoError(t, err)
			got := s.Outbox()
			require.Len(t, got, 2, "committed once, in Record order")
			for i, m := range got {
				assert.Equal(t, ids[i], m.ID)
				assert.Equal(t, "acct-1", m.OrderingKey)
				assert.Equal(t, "payments", m.Destination)
				assert.Equal(t, sk, m.StoredKey)
				assert.Equal(t, map[string]string{"tenant": "t1"}, m.Headers)
			}
			assert.Equal(t, []string{"PaymentTaken", "ReceiptDue"}, []string{got[0].Type, got[1].Type})
			assert.NotEqual(t, ids[0], ids[1])
		})
	}
}

// TestFencedOffRunCommitsNoEvent: a run whose lease ended is taken over; the new owner's
// event commits, and the first owner's never does, though it recorded one and returned.
func TestFencedOffRunCommitsNoEvent(t *testing.T) {
	t.Parallel()
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore()
			clock := storetest.NewSettableClock()
			g, err := idem.New(s, "pay", idem.WithClock(clock), idem.WithLease(time.Minute))
			require.NoError(t, err)
			req := idem.Request{Key: "p-1"}
			recorded, resume := make(chan struct{}), make(chan struct{})
			firstDone := make(chan error, 1)
			go func() {
				_, _, err := idem.Do(context.Background(), g, req, func(ctx context.Context) (string, error) {
					_, err := outbox.Record(ctx, outbox.Event{Destination: "d", OrderingKey: "acct-1", Type: "first"})
					close(recorded)
					<-resume
					return "first", err
				})
				firstDone <- err
			}()
			<-recorded
			clock.Advance(2 * time.Minute) // the first owner's lease ends: it looks crashed

			var secondID string
			v, _, err := idem.Do(context.Background(), g, req, func(ctx context.Context) (string, error) {
				var err error
				secondID, err = outbox.Record(ctx, outbox.Event{Destination: "d", OrderingKey: "acct-1", Type: "second"})
				return "second", err
			})
			require.NoError(t, err)
			require.Equal(t, "second", v)
			close(resume)
			require.ErrorIs(t, <-firstDone, idem.ErrLeaseLost)

			got := s.Outbox()
			require.Len(t, got, 1, "only the new owner's event commits")
			assert.Equal(t, secondID, got[0].ID)
			assert.Equal(t, "second", got[0].Type)
		})
	}
}

// TestRecordRefusals: outside a guarded handler, an invalid event, and a store without an
// outbox table are refused at the call.
func TestRecordRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := outbox.Record(ctx, outbox.Event{Destination: "d", Type: "t"})
	require.ErrorIs(t, err, idem.ErrNoLease)

	cases := []struct {
		name  string
		store idemstore.Store
		ev    outbox.Event
		want  error
	}{
		{"no destination", memstore.New(), outbox.Event{Type: "t"}, outbox.ErrInvalidEvent},
		{"no type", memstore.New(), outbox.Event{Destination: "d"}, outbox.ErrInvalidEvent},
		{"id header", memstore.New(), outbox.Event{Destination: "d", Type: "t", Headers: map[string]string{outbox.IDAttribute: "x"}}, outbox.ErrInvalidEvent},
		{"type header", memstore.New(), outbox.Event{Destination: "d", Type: "t", Headers: map[string]string{outbox.TypeAttribute: "x"}}, outbox.ErrInvalidEvent},
		{"id header in lower case", memstore.New(), outbox.Event{Destination: "d", Type: "t", Headers: map[string]string{"idempotency-key": "x"}}, outbox.ErrInvalidEvent},
		{"dynamomem without outbox table", dynamomem.New(), outbox.Event{Destination: "d", Type: "t"}, idemstore.ErrInvalidAttach},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(tc.store, "op")
			require.NoError(t, err)
			_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (string, error) {
				_, err := outbox.Record(ctx, tc.ev)
				return "", err
			})
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// TestUnorderedEventOrdersByItsID: an event without an ordering key gets its id as one.
func TestUnorderedEventOrdersByItsID(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	g, err := idem.New(s, "op")
	require.NoError(t, err)
	var id string
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (string, error) {
		id, err = outbox.Record(ctx, outbox.Event{Destination: "d", Type: "t"})
		return "", err
	})
	require.NoError(t, err)
	got := s.Outbox()
	require.Len(t, got, 1)
	assert.Equal(t, id, got[0].OrderingKey)
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, id, "a UUID of version 7")
}
