package lambdawrap_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/memstore"
)

// unguardedHooks records the guard's OnUnguarded events.
type unguardedHooks struct {
	mu     sync.Mutex
	events []idem.Event
}

func (u *unguardedHooks) hooks() idem.Hooks {
	return idem.Hooks{OnUnguarded: func(_ context.Context, e idem.Event) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.events = append(u.events, e)
	}}
}

func (u *unguardedHooks) seen() []idem.Event {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]idem.Event(nil), u.events...)
}

// checkUnguarded asserts that each of runs unguarded runs was reported once through the
// guard's hooks, as a missing key, and logged once at WARN through the guard's logger.
func checkUnguarded(t *testing.T, u *unguardedHooks, logs *logRecords, runs int) {
	t.Helper()
	events := u.seen()
	require.Len(t, events, runs, "OnUnguarded calls")
	for _, e := range events {
		assert.Empty(t, e.Key, "no key, so no stored key")
		assert.Empty(t, e.Op)
		require.ErrorIs(t, e.Err, idem.ErrMissingKey)
	}
	want := make([]string, runs)
	for i := range want {
		want[i] = "WARN"
	}
	assert.Equal(t, want, logs.levels(t), "one WARN line per unguarded run")
}

// TestUnguardedHTTP: with an optional key, a guarded request without one runs the handler
// unguarded, and every such run is visible: the guard's OnUnguarded hook and one WARN line
// in the guard's logger. A request with a key is not reported.
func TestUnguardedHTTP(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
		var (
			u    unguardedHooks
			logs logRecords
		)
		g := newGuard(t, store, idem.WithHooks(u.hooks()), idem.WithLogger(logs.logger()))
		a := &app{}
		h := a.handler(t, ev.kind, g, lambdawrap.WithKeyRequired(false))
		ctx := invokeCtx(t)

		withKey := invoke(ctx, t, h, ev)
		require.NoError(t, withKey.err)
		assert.Equal(t, 201, withKey.code)
		assert.Empty(t, u.seen(), "a guarded run is not reported as unguarded")

		ev.setKey()
		for range 2 {
			r := invoke(ctx, t, h, ev)
			require.NoError(t, r.err)
			assert.Equal(t, 201, r.code)
		}
		assert.Equal(t, int64(3), a.runs.Load())
		checkUnguarded(t, &u, &logs, 2)
	})
}

// TestUnguardedWrap: a key function that finds nothing in any event (a JMESPath
// expression with a typo) makes every event run unguarded; each run is reported through
// the guard's hooks and logger, with the key function's error when it had one.
func TestUnguardedWrap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  func(t *testing.T) lambdawrap.KeyFunc[payment]
	}{
		{name: "expression with a typo", key: func(t *testing.T) lambdawrap.KeyFunc[payment] {
			k, err := lambdawrap.KeyFromJMESPath[payment]("paymnet_id")
			require.NoError(t, err)
			return k
		}},
		{name: "key function error", key: func(*testing.T) lambdawrap.KeyFunc[payment] {
			return func(payment) (string, error) { return "", errDeclined }
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var (
				u    unguardedHooks
				logs logRecords
			)
			g := newGuard(t, memstore.New(), idem.WithHooks(u.hooks()), idem.WithLogger(logs.logger()))
			c := &charger{}
			h, err := lambdawrap.Wrap(g, c.charge, lambdawrap.OptionalKey(tc.key(t)))
			require.NoError(t, err)
			for range 2 {
				_, err := h(context.Background(), payment{PaymentID: "p1"})
				require.NoError(t, err)
			}
			assert.Equal(t, int64(2), c.runs.Load(), "both ran: nothing guarded them")
			checkUnguarded(t, &u, &logs, 2)
		})
	}
}

// TestUnguardedAttach is the documented way for a handler that attaches its writes to
// treat an unguarded run: there is no completion to attach to, so idem.Attach returns
// idem.ErrNoLease (as idem.Checkpoint does), and the handler makes the write itself.
// Guarded, the write commits once, with the record; unguarded, each run writes.
func TestUnguardedAttach(t *testing.T) {
	t.Parallel()
	// save is the handler's body for both decorators: it attaches an insert (the
	// in-memory store's attached write), or makes it when unguarded.
	save := func(ctx context.Context, rows *atomic.Int64) error {
		insert := func() error { rows.Add(1); return nil }
		err := idem.Attach(ctx, insert)
		if errors.Is(err, idem.ErrNoLease) { // unguarded: nothing to attach to
			switch cerr := idem.Checkpoint(ctx, "saved"); {
			case cerr == nil:
				return errors.New("checkpoint in an unguarded run: no error")
			case !errors.Is(cerr, idem.ErrNoLease):
				return fmt.Errorf("checkpoint in an unguarded run: %w", cerr)
			}
			err = insert()
		}
		return err
	}
	tests := []struct {
		name string
		// run sends one request, with key or without one when key is "".
		run func(t *testing.T, rows *atomic.Int64) func(key string) error
	}{
		{name: "HTTPAPI", run: func(t *testing.T, rows *atomic.Int64) func(string) error {
			h, err := lambdawrap.HTTPAPI(memGuard(t), func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				return events.APIGatewayV2HTTPResponse{StatusCode: 201}, save(ctx, rows)
			}, lambdawrap.WithKeyRequired(false))
			require.NoError(t, err)
			return func(key string) error {
				resp, err := h(invokeCtx(t), orderRequest(key, `{}`))
				if err == nil && resp.StatusCode != 201 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
				return err
			}
		}},
		{name: "Wrap", run: func(t *testing.T, rows *atomic.Int64) func(string) error {
			h, err := lambdawrap.Wrap(memGuard(t), func(ctx context.Context, p payment) (string, error) {
				return p.PaymentID, save(ctx, rows)
			}, lambdawrap.OptionalKey(paymentKey))
			require.NoError(t, err)
			return func(key string) error {
				_, err := h(invokeCtx(t), payment{PaymentID: key})
				return err
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var rows atomic.Int64
			send := tc.run(t, &rows)
			for range 2 { // a run and its replay
				require.NoError(t, send("row-1"))
			}
			assert.Equal(t, int64(1), rows.Load(), "guarded: written once, with the completion")
			for range 2 {
				require.NoError(t, send(""))
			}
			assert.Equal(t, int64(3), rows.Load(), "unguarded: each run wrote directly")
		})
	}
}
