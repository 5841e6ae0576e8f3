package idemotel_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// rawKey stands for a caller's key that is personal data.
const rawKey = "customer-4711@example.com"

// manualClock is a clock the test moves; its timers are real (no test waits on them).
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// rig is a guard on an in-memory store that fails on demand, traced into an in-memory
// exporter, under a parent span standing for the Lambda invocation.
type rig struct {
	exp    *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	clock  *manualClock
	store  *storetest.Faulty
	guard  *idem.Guard
	tracer *idemotel.Tracer
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{exp: tracetest.NewInMemoryExporter(), clock: &manualClock{now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.exp))
	t.Cleanup(func() { _ = r.tp.Shutdown(context.Background()) })
	var err error
	r.tracer, err = idemotel.New(idemotel.WithTracerProvider(r.tp), idemotel.WithClock(r.clock))
	require.NoError(t, err)
	r.store = storetest.NewFaulty(memstore.New())
	r.guard, err = idem.New(r.store, "test", idem.WithScope("orders"), idem.WithClock(r.clock), idem.WithHooks(r.tracer.Hooks()))
	require.NoError(t, err)
	return r
}

// invocation runs fn under a parent span named "invocation", as otellambda makes one.
func (r *rig) invocation(fn func(ctx context.Context)) trace.SpanContext {
	ctx, span := r.tp.Tracer("test").Start(context.Background(), "invocation")
	defer span.End()
	fn(ctx)
	return span.SpanContext()
}

// summary is what an operator filters on in one span.
type summary struct {
	name     string
	attrs    map[string]any
	status   codes.Code
	desc     string
	duration time.Duration
	events   []string
}

func summarize(s sdktrace.ReadOnlySpan) summary {
	attrs := map[string]any{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.AsInterface()
	}
	var events []string
	for _, e := range s.Events() {
		events = append(events, e.Name)
	}
	return summary{s.Name(), attrs, s.Status().Code, s.Status().Description, s.EndTime().Sub(s.StartTime()), events}
}

// idemSpans returns the summaries of the spans other than "invocation", in the order they
// ended, checking that each is a child of parent.
func (r *rig) idemSpans(t *testing.T, parent trace.SpanContext) []summary {
	t.Helper()
	var out []summary
	for _, s := range r.exp.GetSpans().Snapshots() {
		if s.Name() == "invocation" {
			continue
		}
		assert.Equal(t, parent.SpanID(), s.Parent().SpanID(), "%s is a child of the invocation", s.Name())
		assert.Equal(t, parent.TraceID(), s.SpanContext().TraceID())
		out = append(out, summarize(s))
	}
	return out
}

func TestSpans(t *testing.T) {
	t.Parallel()
	errDeclined := errors.New("card declined for customer-4711@example.com")
	ok := func(r *rig) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			r.clock.advance(40 * time.Millisecond)
			return "order-1", nil
		}
	}
	tests := []struct {
		name string
		// prepare runs before the traced invocation, untraced by the test's reckoning.
		prepare func(t *testing.T, r *rig)
		call    func(ctx context.Context, t *testing.T, r *rig)
		want    func(r *rig) []summary
	}{
		{
			name: "new key",
			call: func(ctx context.Context, t *testing.T, r *rig) {
				_, _, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey}, ok(r))
				require.NoError(t, err)
			},
			want: func(*rig) []summary {
				return []summary{
					{name: idemotel.SpanClaim, attrs: map[string]any{"idem.outcome": "claimed"}},
					{name: idemotel.SpanRun, attrs: map[string]any{"idem.outcome": "ran"}, duration: 40 * time.Millisecond},
				}
			},
		},
		{
			name: "replay",
			prepare: func(t *testing.T, r *rig) {
				_, _, err := idem.Do(context.Background(), r.guard, idem.Request{Key: rawKey}, ok(r))
				require.NoError(t, err)
			},
			call: func(ctx context.Context, t *testing.T, r *rig) {
				_, replayed, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey}, ok(r))
				require.NoError(t, err)
				require.True(t, replayed)
			},
			want: func(*rig) []summary {
				return []summary{{name: idemotel.SpanClaim, attrs: map[string]any{"idem.outcome": "replayed"}}}
			},
		},
		{
			name: "mismatch",
			prepare: func(t *testing.T, r *rig) {
				_, _, err := idem.Do(context.Background(), r.guard, idem.Request{Key: rawKey, Fingerprint: []byte("a")}, ok(r))
				require.NoError(t, err)
			},
			call: func(ctx context.Context, t *testing.T, r *rig) {
				_, _, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey, Fingerprint: []byte("b")}, ok(r))
				require.ErrorIs(t, err, idem.ErrPayloadMismatch)
			},
			want: func(*rig) []summary {
				return []summary{{name: idemotel.SpanClaim, attrs: map[string]any{"idem.outcome": "mismatch"}}}
			},
		},
		{
			name: "in progress, with the holder's lease end",
			call: func(ctx context.Context, t *testing.T, r *rig) {
				_, _, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey}, func(ctx context.Context) (string, error) {
					r.clock.advance(10 * time.Millisecond)
					_, _, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey}, ok(r))
					return "", err
				})
				require.ErrorIs(t, err, idem.ErrInProgress)
			},
			want: func(r *rig) []summary {
				lease := r.clock.Now().Add(-10 * time.Millisecond).Add(idem.DefaultLease + idem.DefaultLeaseMargin) // without a deadline: WithLease plus the margin
				return []summary{
					{name: idemotel.SpanClaim, attrs: map[string]any{"idem.outcome": "claimed"}},
					{name: idemotel.SpanClaim, attrs: map[string]any{"idem.outcome": "in_progress",
						"idem.lease.end": lease.Format(time.RFC3339Nano)}},
					{name: idemotel.SpanRun, attrs: map[string]any{"idem.outcome": "released", "error.type": "*idem.InProgressError"},
						status: codes.Error, desc: "not completed", duration: 10 * time.Millisecond},
				}
			},
		},
		{
			name: "handler error: the type, not the message",
			call: func(ctx context.Context, t *testing.T, r *rig) {
				_, _, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey}, func(context.Context) (string, error) {
					r.clock.advance(5 * time.Millisecond)
					return "", errDeclined
				})
				require.ErrorIs(t, err, errDeclined)
			},
			want: func(*rig) []summary {
				return []summary{
					{name: idemotel.SpanClaim, attrs: map[string]any{"idem.outcome": "claimed"}},
					{name: idemotel.SpanRun, attrs: map[string]any{"idem.outcome": "released", "error.type": "*errors.errorString"},
						status: codes.Error, desc: "not completed", duration: 5 * time.Millisecond},
				}
			},
		},
		{
			name:    "store error on the claim",
			prepare: func(_ *testing.T, r *rig) { r.store.Fail("claim", errors.New("throttled"), false) },
			call: func(ctx context.Context, t *testing.T, r *rig) {
				_, _, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey}, ok(r))
				require.ErrorIs(t, err, idem.ErrStore)
			},
			want: func(*rig) []summary {
				return []summary{{name: idemotel.SpanClaim, attrs: map[string]any{"idem.outcome": "store_error", "idem.store.op": "claim"},
					status: codes.Error, desc: "store_error", events: []string{"exception"}}}
			},
		},
		{
			name:    "store error on the completion",
			prepare: func(_ *testing.T, r *rig) { r.store.Fail("complete", errors.New("throttled"), false) },
			call: func(ctx context.Context, t *testing.T, r *rig) {
				_, _, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey}, ok(r))
				require.ErrorIs(t, err, idem.ErrStore)
			},
			want: func(*rig) []summary {
				return []summary{
					{name: idemotel.SpanClaim, attrs: map[string]any{"idem.outcome": "claimed"}},
					{name: idemotel.SpanRun, attrs: map[string]any{"idem.outcome": "store_error", "idem.store.op": "complete"},
						status: codes.Error, desc: "store_error", duration: 40 * time.Millisecond, events: []string{"exception"}},
				}
			},
		},
		{
			name:    "lease lost",
			prepare: func(_ *testing.T, r *rig) { r.store.Fail("complete", idem.ErrLeaseLost, false) },
			call: func(ctx context.Context, t *testing.T, r *rig) {
				_, _, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey}, ok(r))
				require.ErrorIs(t, err, idem.ErrLeaseLost)
			},
			want: func(*rig) []summary {
				return []summary{
					{name: idemotel.SpanClaim, attrs: map[string]any{"idem.outcome": "claimed"}},
					{name: idemotel.SpanRun, attrs: map[string]any{"idem.outcome": "lease_lost"},
						status: codes.Error, desc: "lease_lost", duration: 40 * time.Millisecond, events: []string{"exception"}},
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			if tc.prepare != nil {
				tc.prepare(t, r)
			}
			r.exp.Reset()
			parent := r.invocation(func(ctx context.Context) { tc.call(ctx, t, r) })

			stored, err := r.guard.StoredKey(idem.Request{Key: rawKey})
			require.NoError(t, err)
			hash := stored[strings.LastIndexByte(stored, '#')+1:]
			want := tc.want(r)
			for i := range want {
				want[i].attrs["idem.scope"] = "orders.test"
				want[i].attrs["idem.key.hash"] = hash
			}
			got := r.idemSpans(t, parent)
			assert.Equal(t, want, got)
			for _, s := range r.exp.GetSpans() {
				for _, kv := range s.Attributes {
					assert.NotContains(t, kv.Value.Emit(), "customer-4711", "%s: %s", s.Name, kv.Key)
				}
				for _, e := range s.Events {
					for _, kv := range e.Attributes {
						assert.NotContains(t, kv.Value.Emit(), "customer-4711", "%s: %s", s.Name, kv.Key)
					}
				}
			}
		})
	}
}

// Every retry of one operation, in whatever invocation, carries the same key hash: one
// query finds them all.
func TestRetriesShareTheKeyHash(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for range 3 {
		r.invocation(func(ctx context.Context) {
			_, _, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey}, func(context.Context) (int, error) { return 1, nil })
			require.NoError(t, err)
		})
		r.invocation(func(ctx context.Context) {
			_, _, err := idem.Do(ctx, r.guard, idem.Request{Key: "someone-else"}, func(context.Context) (int, error) { return 1, nil })
			require.NoError(t, err)
		})
	}
	byHash := map[string][]string{}
	traces := map[string]map[trace.TraceID]bool{}
	for _, s := range r.exp.GetSpans() {
		for _, kv := range s.Attributes {
			if kv.Key == idemotel.AttrKeyHash {
				h := kv.Value.AsString()
				byHash[h] = append(byHash[h], s.Name)
				if traces[h] == nil {
					traces[h] = map[trace.TraceID]bool{}
				}
				traces[h][s.SpanContext.TraceID()] = true
			}
		}
	}
	require.Len(t, byHash, 2, "one hash per key")
	for h, spans := range byHash {
		assert.Len(t, spans, 4, "%s: claim and run, then two replays", h)
		assert.Len(t, traces[h], 3, "%s: across three invocations", h)
	}
}

func TestUnusualKeysRecordNoKey(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for _, key := range []string{rawKey, "scope#" + strings.Repeat("z", 64), "scope#abc"} {
		r.tracer.Hooks().OnClaimed(context.Background(), idem.Event{Key: key})
	}
	spans := r.exp.GetSpans()
	require.Len(t, spans, 3)
	for _, s := range spans {
		assert.Equal(t, []attribute.KeyValue{idemotel.AttrOutcome.String(idemotel.OutcomeClaimed)}, s.Attributes)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opt  idemotel.Option
	}{
		{"WithTracerProvider", idemotel.WithTracerProvider(nil)},
		{"WithClock", idemotel.WithClock(nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr, err := idemotel.New(tc.opt)
			require.Error(t, err)
			assert.Nil(t, tr)
			assert.Contains(t, err.Error(), tc.name)
		})
	}
}
