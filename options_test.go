package idem_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestWithClockReadsDeadlinesOnItsTime backs WithClock's doc: a context's deadline is read
// on the guard's clock. A context.WithTimeout deadline is in wall time, so with a clock far
// behind wall time every lease gets the cap (WithMaxLease plus the margin: a Retry-After
// of 902 s by default), and with a clock far ahead the shortest lease (1 s); a deadline in
// the clock's own time, or no deadline, gives the lease the test means.
func TestWithClockReadsDeadlinesOnItsTime(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name      string
		clock     time.Time
		ctx       func(clock time.Time) (context.Context, context.CancelFunc)
		wantRetry time.Duration
	}{
		{"WallDeadlineClockInThePast", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
			func(time.Time) (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 30*time.Second)
			}, idem.DefaultMaxLease + idem.DefaultLeaseMargin},
		{"WallDeadlineClockInTheFuture", time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
			func(time.Time) (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 30*time.Second)
			}, time.Second},
		{"DeadlineInTheClocksTime", now,
			func(clock time.Time) (context.Context, context.CancelFunc) {
				return context.WithDeadline(context.Background(), clock.Add(30*time.Second))
			}, 30*time.Second + idem.DefaultLeaseMargin},
		{"NoDeadline", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
			func(time.Time) (context.Context, context.CancelFunc) {
				return context.WithCancel(context.Background())
			}, 30*time.Second + idem.DefaultLeaseMargin}, // WithLease
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(memstore.New(), "test", idem.WithLease(30*time.Second),
				idem.WithClock(idem.ClockFunc(func() time.Time { return tc.clock })))
			require.NoError(t, err)
			ctx, cancel := tc.ctx(tc.clock)
			defer cancel()
			var inFlight *idem.InProgressError
			_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, func(context.Context) (int, error) {
				// A duplicate arrives while the handler runs.
				_, _, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 2, nil })
				require.ErrorAs(t, err, &inFlight)
				return 1, nil
			})
			require.NoError(t, err)
			assert.Equal(t, tc.wantRetry, inFlight.RetryAfter)
		})
	}
}

func TestOptionsRejectBadValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opt  idem.Option
	}{
		{"WithExpiry", idem.WithExpiry(0)},
		{"WithLease", idem.WithLease(-time.Second)},
		{"WithLeaseMargin", idem.WithLeaseMargin(-time.Second)},
		{"WithMaxLease", idem.WithMaxLease(0)},
		{"WithScope", idem.WithScope("")},
		{"WithCache", idem.WithCache(-1)},
		{"WithWait", idem.WithWait(time.Second, 2*time.Second)},
		{"WithRememberFailures", idem.WithRememberFailures(nil)},
		{"WithHeartbeat", idem.WithHeartbeat(-1)},
		{"WithCodec", idem.WithCodec(nil)},
		{"WithCompression", idem.WithCompression(-1)},
		{"WithMaxResultSize", idem.WithMaxResultSize(0)},
		{"WithClock", idem.WithClock(nil)},
		{"WithLogger", idem.WithLogger(nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := idem.New(memstore.New(), "test", tc.opt)
			require.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.Contains(t, err.Error(), tc.name, "the error names the option")
		})
	}
	_, err := idem.New(nil, "test")
	require.ErrorIs(t, err, idem.ErrInvalidOption)
}

// TestDefaultScope: without WithScope, a guard in Lambda (AWS_LAMBDA_FUNCTION_NAME set, as
// aws-lambda-go's lambdacontext.FunctionName reads it) scopes its keys by the function's
// name, and elsewhere by DefaultScope; WithScope wins over both. A function name that is
// not a valid scope is an error naming both, never a silent fallback.
func TestDefaultScope(t *testing.T) {
	longest := strings.Repeat("Fn-_9", 12) + "abcd" // Lambda's longest name: 64 of [A-Za-z0-9-_]
	tests := []struct {
		name     string
		function string // AWS_LAMBDA_FUNCTION_NAME; "" is outside Lambda
		opts     []idem.Option
		want     string
	}{
		{name: "outside Lambda", want: idem.DefaultScope + ".test"},
		{name: "in Lambda", function: "payments-fn", want: "payments-fn.test"},
		{name: "longest function name", function: longest, want: longest + ".test"},
		{name: "WithScope in Lambda", function: "payments-fn", opts: []idem.Option{idem.WithScope("orders")}, want: "orders.test"},
		{name: "WithScope outside Lambda", opts: []idem.Option{idem.WithScope("orders")}, want: "orders.test"},
		{name: "WithScope of the function's name", function: "payments-fn", opts: []idem.Option{idem.WithScope("payments-fn")}, want: "payments-fn.test"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_LAMBDA_FUNCTION_NAME", tc.function)
			g, err := idem.New(memstore.New(), "test", tc.opts...)
			require.NoError(t, err)
			assert.Equal(t, tc.want, g.Scope())
		})
	}
	invalid := []struct{ name, function string }{
		{"space", "has space"},
		{"hash", "has#hash"},
		{"too long", strings.Repeat("f", idem.MaxScopeLength+1)},
	}
	for _, tc := range invalid {
		t.Run("function name with "+tc.name, func(t *testing.T) {
			t.Setenv("AWS_LAMBDA_FUNCTION_NAME", tc.function)
			_, err := idem.New(memstore.New(), "test")
			require.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.Contains(t, err.Error(), "AWS_LAMBDA_FUNCTION_NAME")
			assert.Contains(t, err.Error(), "WithScope")
			g, err := idem.New(memstore.New(), "test", idem.WithScope("orders"))
			require.NoError(t, err, "WithScope replaces the function's name")
			assert.Equal(t, "orders.test", g.Scope())
		})
	}
}

// TestEmptyScopeSaysWhy: WithScope("") is what WithScope(lambdacontext.FunctionName) is
// outside Lambda; the error says so, and what to do instead.
func TestEmptyScopeSaysWhy(t *testing.T) {
	t.Parallel()
	_, err := idem.New(memstore.New(), "test", idem.WithScope(""))
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	assert.Contains(t, err.Error(), "lambdacontext.FunctionName is empty outside Lambda")
}

// TestHeartbeatMustFitTheLease checks the interval against the lease a claim is granted
// without a deadline, WithLease capped by WithMaxLease, in whatever order the options come:
// a beat at most every half of that lease less the margin (the point where the handler's
// context is cancelled if no extension succeeded), so that one missed beat does not lose it.
func TestHeartbeatMustFitTheLease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []idem.Option
		ok   bool
	}{
		{"half of WithLease less the margin", []idem.Option{idem.WithLease(time.Minute), idem.WithHeartbeat(29 * time.Second)}, true},
		{"half of WithLease", []idem.Option{idem.WithLease(time.Minute), idem.WithHeartbeat(30 * time.Second)}, false},
		{"half of WithLease, another margin", []idem.Option{idem.WithLease(time.Minute), idem.WithHeartbeat(30 * time.Second), idem.WithLeaseMargin(0)}, true},
		{"above half of WithLease", []idem.Option{idem.WithLease(time.Minute), idem.WithHeartbeat(40 * time.Second)}, false},
		{"half of WithLease, above half of the default max lease", []idem.Option{idem.WithLease(40 * time.Minute), idem.WithHeartbeat(20 * time.Minute)}, false},
		{"half of the default max lease less the margin", []idem.Option{idem.WithLease(40 * time.Minute), idem.WithHeartbeat(7*time.Minute + 29*time.Second)}, true},
		{"above half of WithMaxLease", []idem.Option{idem.WithHeartbeat(20 * time.Second), idem.WithMaxLease(30 * time.Second)}, false},
		{"half of WithMaxLease less the margin", []idem.Option{idem.WithHeartbeat(14 * time.Second), idem.WithMaxLease(30 * time.Second)}, true},
		{"a lease no longer than the margin", []idem.Option{idem.WithHeartbeat(time.Millisecond), idem.WithLease(2 * time.Second)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := idem.New(memstore.New(), "test", tc.opts...)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "WithHeartbeat")
		})
	}
}

// TestWithScopeValidates: a scope is validated like the operation, since both make up the
// stored key "<scope>.<operation>#<sha256 hex>": printable ASCII without spaces or '#' (so
// that no scope can forge a key of another form, such as the DynamoDB store's
// "<key>#result#<token>"), 1 to MaxScopeLength bytes (so that a stored key stays within
// every store's key limits). A bad scope is an error wrapping ErrInvalidOption that names
// WithScope.
func TestWithScopeValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		scope string
		ok    bool
	}{
		{"Plain", "orders-api", true},
		{"FunctionName", "my_Function-1", true},
		{"Punctuation", "a/b.c:d@e", true},
		{"Longest", strings.Repeat("s", idem.MaxScopeLength), true},
		{"Empty", "", false},
		{"TooLong", strings.Repeat("s", idem.MaxScopeLength+1), false},
		{"Hash", "a#result#b", false},
		{"Space", "a b", false},
		{"Tab", "a\tb", false},
		{"Control", "a\x00b", false},
		{"Delete", "a\x7fb", false},
		{"NonASCII", "café", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(memstore.New(), "test", idem.WithScope(tc.scope))
			if tc.ok {
				require.NoError(t, err)
				key, err := g.StoredKey(idem.Request{Key: "k"})
				require.NoError(t, err)
				assert.True(t, strings.HasPrefix(key, tc.scope+".test#"), key)
				return
			}
			require.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.Contains(t, err.Error(), "WithScope", "the error names the option")
		})
	}
}

// TestStoredKeyLength: with the longest scope and operation, a stored key is
// MaxScopeLength + 1 + MaxOperationLength + 1 + 64 bytes (322), and has exactly one '#',
// before its hash.
func TestStoredKeyLength(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), strings.Repeat("o", idem.MaxOperationLength),
		idem.WithScope(strings.Repeat("s", idem.MaxScopeLength)))
	require.NoError(t, err)
	key, err := g.StoredKey(idem.Request{Key: strings.Repeat("k", idem.MaxKeyLength), Tenant: "t"})
	require.NoError(t, err)
	assert.Len(t, key, idem.MaxScopeLength+1+idem.MaxOperationLength+1+64)
	assert.Equal(t, 322, len(key))
	assert.Equal(t, 1, strings.Count(key, "#"))
}
