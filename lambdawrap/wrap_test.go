package lambdawrap_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/memstore"
)

type payment struct {
	PaymentID  string `json:"payment_id"`
	CustomerID string `json:"customer_id"`
	Amount     int    `json:"amount"`
}

type receipt struct {
	Receipt string `json:"receipt"`
	Run     int64  `json:"run"`
}

// charger is a handler that counts its runs.
type charger struct {
	runs atomic.Int64
	fail atomic.Bool
}

var errDeclined = errors.New("charger: card declined")

func (c *charger) charge(_ context.Context, p payment) (receipt, error) {
	n := c.runs.Add(1)
	if c.fail.Load() {
		return receipt{}, errDeclined
	}
	return receipt{Receipt: "rcpt-" + p.PaymentID, Run: n}, nil
}

func paymentKey(p payment) (string, error) { return p.PaymentID, nil }

func TestWrap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &charger{}
	h, err := lambdawrap.Wrap(memGuard(t), c.charge, paymentKey)
	require.NoError(t, err)

	first, err := h(ctx, payment{PaymentID: "p1", Amount: 100})
	require.NoError(t, err)
	again, err := h(ctx, payment{PaymentID: "p1", Amount: 100})
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Equal(t, int64(1), c.runs.Load())

	// Without a fingerprint, the key alone decides: no payload validation by default.
	other, err := h(ctx, payment{PaymentID: "p1", Amount: 999})
	require.NoError(t, err)
	assert.Equal(t, first, other)

	_, err = h(ctx, payment{PaymentID: "p2"})
	require.NoError(t, err)
	assert.Equal(t, int64(2), c.runs.Load())
}

// TestWrapInvoke runs the wrapped handler as the Lambda runtime does.
func TestWrapInvoke(t *testing.T) {
	t.Parallel()
	c := &charger{}
	key, err := lambdawrap.KeyFromJMESPath[payment]("payment_id")
	require.NoError(t, err)
	h, err := lambdawrap.Wrap(memGuard(t), c.charge, key)
	require.NoError(t, err)
	lh := invoker{h: h}
	ctx := invokeCtx(t)
	payload := []byte(`{"payment_id":"p-9","customer_id":"c-1","amount":250}`)
	out1, err := lh.Invoke(ctx, payload)
	require.NoError(t, err)
	out2, err := lh.Invoke(ctx, payload)
	require.NoError(t, err)
	assert.JSONEq(t, `{"receipt":"rcpt-p-9","run":1}`, string(out1))
	assert.Equal(t, string(out1), string(out2))

	_, err = lh.Invoke(ctx, []byte(`{"customer_id":"c-1"}`))
	require.Error(t, err, "an event without a key fails the invocation")
	assert.Equal(t, int64(1), c.runs.Load())
}

func TestWrapErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	errKey := errors.New("no key here")
	tests := []struct {
		name    string
		key     lambdawrap.KeyFunc[payment]
		opts    []lambdawrap.Option[payment]
		fail    bool
		wantErr []error
		runs    int64 // after two calls
	}{
		{name: "empty key", key: func(payment) (string, error) { return "", nil },
			wantErr: []error{idem.ErrMissingKey}},
		{name: "key function error", key: func(payment) (string, error) { return "", errKey },
			wantErr: []error{idem.ErrMissingKey, errKey}},
		{name: "empty key, optional", key: lambdawrap.OptionalKey(func(payment) (string, error) { return "", nil }),
			runs: 2},
		{name: "key function error, optional", key: lambdawrap.OptionalKey(func(payment) (string, error) { return "", errKey }),
			runs: 2},
		{name: "key too long for the guard", key: func(payment) (string, error) { return string(make([]byte, idem.MaxKeyLength+1)), nil },
			wantErr: []error{idem.ErrInvalidKey}},
		{name: "handler error is not stored", key: paymentKey, fail: true,
			wantErr: []error{errDeclined}, runs: 2},
		{name: "fingerprint error", key: paymentKey,
			opts:    []lambdawrap.Option[payment]{lambdawrap.WithFingerprint(func(payment) ([]byte, error) { return nil, errKey })},
			wantErr: []error{errKey}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &charger{}
			c.fail.Store(tc.fail)
			h, err := lambdawrap.Wrap(memGuard(t), c.charge, tc.key, tc.opts...)
			require.NoError(t, err)
			for range 2 {
				_, err = h(ctx, payment{PaymentID: "p1"})
				for _, want := range tc.wantErr {
					require.ErrorIs(t, err, want)
				}
				if len(tc.wantErr) == 0 {
					require.NoError(t, err)
				}
			}
			assert.Equal(t, tc.runs, c.runs.Load())
		})
	}
}

func TestWrapPayloadValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, opt := range map[string]lambdawrap.Option[payment]{
		"WithFingerprint": lambdawrap.WithFingerprint(func(p payment) ([]byte, error) {
			return json.Marshal([]any{p.CustomerID, p.Amount})
		}),
		"WithFingerprintJMESPath": lambdawrap.WithFingerprintJMESPath[payment]("[customer_id, amount]"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := &charger{}
			h, err := lambdawrap.Wrap(memGuard(t), c.charge, paymentKey, opt)
			require.NoError(t, err)
			_, err = h(ctx, payment{PaymentID: "p1", CustomerID: "c1", Amount: 100})
			require.NoError(t, err)
			_, err = h(ctx, payment{PaymentID: "p1", CustomerID: "c1", Amount: 100})
			require.NoError(t, err)
			_, err = h(ctx, payment{PaymentID: "p1", CustomerID: "c1", Amount: 101})
			require.ErrorIs(t, err, idem.ErrPayloadMismatch)
			assert.Equal(t, int64(1), c.runs.Load())
		})
	}
}

func TestWrapTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &charger{}
	h, err := lambdawrap.Wrap(memGuard(t), c.charge, paymentKey,
		lambdawrap.WithTenant(func(p payment) string { return p.CustomerID }))
	require.NoError(t, err)
	a, err := h(ctx, payment{PaymentID: "p1", CustomerID: "alice"})
	require.NoError(t, err)
	b, err := h(ctx, payment{PaymentID: "p1", CustomerID: "bob"})
	require.NoError(t, err)
	assert.NotEqual(t, a.Run, b.Run)
	a2, err := h(ctx, payment{PaymentID: "p1", CustomerID: "alice"})
	require.NoError(t, err)
	assert.Equal(t, a, a2)
	assert.Equal(t, int64(2), c.runs.Load())
}

// TestWrapInProgress: a duplicate delivered while the first runs fails with
// ErrInProgress, so Lambda retries it later, and its Retry-After follows the deadline.
func TestWrapInProgress(t *testing.T) {
	t.Parallel()
	clock := newClock()
	g := memGuard(t, idem.WithClock(clock))
	started, release := make(chan struct{}), make(chan struct{})
	h, err := lambdawrap.Wrap(g, func(ctx context.Context, p payment) (receipt, error) {
		close(started)
		<-release
		return receipt{Receipt: p.PaymentID}, nil
	}, paymentKey)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := h(withDeadline(context.Background(), clock.Now().Add(10*time.Second)), payment{PaymentID: "p1"})
		done <- err
	}()
	<-started
	_, err = h(context.Background(), payment{PaymentID: "p1"})
	var inProgress *idem.InProgressError
	require.ErrorAs(t, err, &inProgress)
	assert.Equal(t, 12*time.Second, inProgress.RetryAfter, "deadline plus the default margin")
	close(release)
	require.NoError(t, <-done)
}

// TestWrapConfig: Wrap refuses what only shows at run time, naming it. An option of
// another event type, or an HTTP option, does not compile (see options_test.go).
func TestWrapConfig(t *testing.T) {
	t.Parallel()
	g := memGuard(t)
	c := &charger{}
	tests := []struct {
		name string
		g    *idem.Guard
		key  lambdawrap.KeyFunc[payment]
		opts []lambdawrap.Option[payment]
		want string
	}{
		{name: "nil guard", key: paymentKey, want: "lambdawrap: Wrap: guard, handler and key function must not be nil"},
		{name: "nil key", g: g, want: "lambdawrap: Wrap: guard, handler and key function must not be nil"},
		{name: "nil optional key", g: g, key: lambdawrap.OptionalKey[payment](nil),
			want: "lambdawrap: Wrap: guard, handler and key function must not be nil"},
		{name: "bad JMESPath", g: g, key: paymentKey, opts: []lambdawrap.Option[payment]{lambdawrap.WithFingerprintJMESPath[payment]("a[")},
			want: "lambdawrap: WithFingerprintJMESPath: "},
		{name: "nil tenant", g: g, key: paymentKey, opts: []lambdawrap.Option[payment]{lambdawrap.WithTenant[payment](nil)},
			want: "lambdawrap: WithTenant: must not be nil"},
		{name: "nil fingerprint", g: g, key: paymentKey, opts: []lambdawrap.Option[payment]{lambdawrap.WithFingerprint[payment](nil)},
			want: "lambdawrap: WithFingerprint: must not be nil"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, err := lambdawrap.Wrap(tc.g, c.charge, tc.key, tc.opts...)
			require.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.Nil(t, h)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	h, err := lambdawrap.Wrap(g, c.charge, paymentKey, nil, lambdawrap.Option[payment](nil))
	assert.NoError(t, err, "a nil option is skipped")
	assert.NotNil(t, h)
}

// TestWrapCompletionFailed: the generic wrapper returns the handler's result when its
// outcome could not be recorded, so Lambda does not retry work that happened; when nothing
// committed, it returns the error, and the retry runs again.
func TestWrapCompletionFailed(t *testing.T) {
	t.Parallel()
	notCommitted := fmt.Errorf("store: transaction cancelled: %w", idemstore.ErrNotCommitted)
	tests := []struct {
		name    string
		err     error
		wantErr error // of the first invocation
		// retryInProgress: the retry finds the key in progress; otherwise it runs again.
		retryInProgress bool
		runs            int64
	}{
		{name: "completion failed", err: errUnavailable, retryInProgress: true, runs: 1},
		{name: "not committed", err: notCommitted, wantErr: idemstore.ErrNotCommitted, runs: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs logRecords
			c := &charger{}
			key, err := lambdawrap.KeyFromJMESPath[payment]("payment_id")
			require.NoError(t, err)
			fails := int64(1) // a verdict: the guard does not send it again
			if errors.Is(tc.err, errUnavailable) {
				fails = 1 << 30 // every resend fails too
			}
			g := newGuard(t, newCompleteFailStore(memstore.New(), tc.err, fails), idem.WithLogger(logs.logger()))
			h, err := lambdawrap.Wrap(g, c.charge, key)
			require.NoError(t, err)
			lh := invoker{h: h}
			ctx := invokeCtx(t)
			payload := []byte(`{"payment_id":"p-9","customer_id":"c-1","amount":250}`)

			out, err := lh.Invoke(ctx, payload)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
				assert.JSONEq(t, `{"receipt":"rcpt-p-9","run":1}`, string(out))
				assert.Equal(t, []string{"ERROR"}, logs.levels(t))
			}

			_, err = lh.Invoke(ctx, payload)
			if tc.retryInProgress {
				require.ErrorIs(t, err, idem.ErrInProgress)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.runs, c.runs.Load())
		})
	}
}
