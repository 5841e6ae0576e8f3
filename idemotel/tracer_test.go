package idemotel_test

import (
	"context"
	"errors"
	"fmt"
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
	parent   string // the parent span's name
	attrs    map[string]any
	status   codes.Code
	desc     string
	duration time.Duration
	events   []string
}

func summarize(s sdktrace.ReadOnlySpan, parent string) summary {
	attrs := map[string]any{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.AsInterface()
	}
	var events []string
	for _, e := range s.Events() {
		events = append(events, e.Name)
	}
	return summary{s.Name(), parent, attrs, s.Status().Code, s.Status().Description, s.EndTime().Sub(s.StartTime()), events}
}

// idemSpans returns the summaries of the spans other than "invocation", in the order they
// ended, checking that each is in parent's trace, with its parent's name.
func (r *rig) idemSpans(t *testing.T, parent trace.SpanContext) []summary {
	t.Helper()
	names := map[trace.SpanID]string{}
	for _, s := range r.exp.GetSpans().Snapshots() {
		names[s.SpanContext().SpanID()] = s.Name()
	}
	var out []summary
	for _, s := range r.exp.GetSpans().Snapshots() {
		if s.Name() == "invocation" {
			continue
		}
		assert.Equal(t, parent.TraceID(), s.SpanContext().TraceID(), "%s is in the invocation's trace", s.Name())
		out = append(out, summarize(s, names[s.Parent().SpanID()]))
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
					{name: idemotel.SpanClaim, parent: "invocation", attrs: map[string]any{"idem.outcome": "claimed"}},
					{name: idemotel.SpanRun, parent: "invocation", attrs: map[string]any{"idem.outcome": "ran"}, duration: 40 * time.Millisecond},
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
				return []summary{{name: idemotel.SpanClaim, parent: "invocation", attrs: map[string]any{"idem.outcome": "replayed", "idem.replay.cached": false}}}
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
				return []summary{{name: idemotel.SpanClaim, parent: "invocation", attrs: map[string]any{"idem.outcome": "mismatch"}}}
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
					{name: idemotel.SpanClaim, parent: "invocation", attrs: map[string]any{"idem.outcome": "claimed"}},
					{name: idemotel.SpanClaim, parent: idemotel.SpanRun, attrs: map[string]any{"idem.outcome": "in_progress",
						"idem.lease.end": lease.Format(time.RFC3339Nano)}},
					{name: idemotel.SpanRun, parent: "invocation", attrs: map[string]any{"idem.outcome": "released", "error.type": "idem.ErrInProgress"},
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
					{name: idemotel.SpanClaim, parent: "invocation", attrs: map[string]any{"idem.outcome": "claimed"}},
					{name: idemotel.SpanRun, parent: "invocation", attrs: map[string]any{"idem.outcome": "released", "error.type": "_OTHER"},
						status: codes.Error, desc: "not completed", duration: 5 * time.Millisecond},
				}
			},
		},
		{
			name: "handler error: the outermost typed error",
			call: func(ctx context.Context, t *testing.T, r *rig) {
				_, _, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey}, func(context.Context) (string, error) {
					return "", fmt.Errorf("charge: %w", &declinedError{customer: rawKey})
				})
				require.Error(t, err)
			},
			want: func(*rig) []summary {
				return []summary{
					{name: idemotel.SpanClaim, parent: "invocation", attrs: map[string]any{"idem.outcome": "claimed"}},
					{name: idemotel.SpanRun, parent: "invocation", attrs: map[string]any{"idem.outcome": "released", "error.type": "*idemotel_test.declinedError"},
						status: codes.Error, desc: "not completed"},
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
				return []summary{{name: idemotel.SpanClaim, parent: "invocation", attrs: map[string]any{"idem.outcome": "store_error", "idem.store.op": "claim", "error.type": "idem.ErrStore"},
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
					{name: idemotel.SpanClaim, parent: "invocation", attrs: map[string]any{"idem.outcome": "claimed"}},
					{name: idemotel.SpanRun, parent: "invocation", attrs: map[string]any{"idem.outcome": "store_error", "idem.store.op": "complete", "error.type": "idem.ErrStore"},
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
					{name: idemotel.SpanClaim, parent: "invocation", attrs: map[string]any{"idem.outcome": "claimed"}},
					{name: idemotel.SpanRun, parent: "invocation", attrs: map[string]any{"idem.outcome": "lease_lost", "error.type": "idem.ErrLeaseLost"},
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
				want[i].attrs["idem.scope"] = "orders"
				want[i].attrs["idem.operation"] = "test"
				want[i].attrs["idem.key.hash"] = hash
			}
			got := r.idemSpans(t, parent)
			for _, s := range got {
				// Checked here, the same for every case: a claim's lease end, a run's handler time.
				if s.attrs["idem.outcome"] == idemotel.OutcomeClaimed {
					_, err := time.Parse(time.RFC3339Nano, fmt.Sprint(s.attrs["idem.lease.end"]))
					assert.NoError(t, err, "a claim's span carries its lease end")
					delete(s.attrs, "idem.lease.end")
				}
				if s.name == idemotel.SpanRun {
					assert.Contains(t, s.attrs, "idem.handler.duration_ms")
					delete(s.attrs, "idem.handler.duration_ms")
				}
			}
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

// declinedError is a handler's typed error, whose message holds personal data.
type declinedError struct{ customer string }

func (e *declinedError) Error() string { return "card declined for " + e.customer }

// The handler runs on idem.run's context: the spans it starts (a DynamoDB call, an HTTP
// client's) are children of idem.run, which is a child of the invocation.
func TestHandlerSpansNestUnderRun(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	parent := r.invocation(func(ctx context.Context) {
		_, _, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey}, func(ctx context.Context) (int, error) {
			_, s := r.tp.Tracer("aws-sdk").Start(ctx, "DynamoDB.PutItem")
			r.clock.advance(7 * time.Millisecond)
			s.End()
			return 1, nil
		})
		require.NoError(t, err)
	})
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range r.exp.GetSpans().Snapshots() {
		byName[s.Name()] = s
	}
	require.Contains(t, byName, idemotel.SpanRun)
	require.Contains(t, byName, "DynamoDB.PutItem")
	run := byName[idemotel.SpanRun]
	assert.Equal(t, parent.SpanID(), run.Parent().SpanID(), "idem.run is a child of the invocation")
	assert.Equal(t, run.SpanContext().SpanID(), byName["DynamoDB.PutItem"].Parent().SpanID(), "the handler's span is a child of idem.run")
	assert.Equal(t, 7*time.Millisecond, run.EndTime().Sub(run.StartTime()))
}

// A run whose lease the watchdog found run out, and whose completion then met another
// owner's record, is one idem.run span, lease_lost.
func TestOneRunSpanPerLostLease(t *testing.T) {
	t.Parallel()
	const margin = 2 * time.Second
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	clock := storetest.NewSimulatedClock()
	tracer, err := idemotel.New(idemotel.WithTracerProvider(tp), idemotel.WithClock(clock))
	require.NoError(t, err)
	g, err := idem.New(memstore.New(), "test", idem.WithScope("orders"), idem.WithClock(clock), idem.WithLease(time.Minute),
		idem.WithLeaseMargin(margin), idem.WithHooks(tracer.Hooks()))
	require.NoError(t, err)
	var other error
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: rawKey}, func(hctx context.Context) (int, error) {
		wait, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.True(t, clock.WaitAfterCalls(wait, 1), "the lease watchdog does not wait on the clock")
		require.True(t, clock.AdvanceToNext(wait), "the lease watchdog set no timer")
		<-hctx.Done()
		clock.Advance(margin + time.Second) // the lease ended: another caller takes the key over
		_, _, other = idem.Do(context.Background(), g, idem.Request{Key: rawKey}, func(context.Context) (int, error) { return 2, nil })
		return 1, nil // its completion meets the other owner's record
	})
	require.ErrorIs(t, err, idem.ErrLeaseLost)
	require.NoError(t, other)
	var runs []summary
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == idemotel.SpanRun {
			runs = append(runs, summarize(s, ""))
		}
	}
	require.Len(t, runs, 2, "one run span for each of the two runs")
	assert.Equal(t, "ran", runs[0].attrs["idem.outcome"], "the other owner's run ends first")
	assert.Equal(t, "lease_lost", runs[1].attrs["idem.outcome"])
	assert.Equal(t, "idem.ErrLeaseLost", runs[1].attrs["error.type"])
	assert.Equal(t, codes.Error, runs[1].status)
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

// The spans carry what the hooks report beyond the outcome: a claim's lease end, whether
// a replay came from the local cache, and the handler's duration apart from the run's.
func TestSpansCarryLeaseCacheAndHandlerTime(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	clock := &manualClock{now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	tracer, err := idemotel.New(idemotel.WithTracerProvider(tp), idemotel.WithClock(clock))
	require.NoError(t, err)
	store := storetest.NewFaulty(memstore.New())
	g, err := idem.New(store, "test", idem.WithScope("orders"), idem.WithClock(clock), idem.WithCache(10),
		idem.WithHooks(tracer.Hooks()))
	require.NoError(t, err)
	claimedAt := clock.Now()
	ctx := context.Background()
	_, _, err = idem.Do(ctx, g, idem.Request{Key: rawKey}, func(context.Context) (int, error) {
		clock.advance(25 * time.Millisecond)
		return 1, nil
	})
	require.NoError(t, err)
	_, replayed, err := idem.Do(ctx, g, idem.Request{Key: rawKey}, func(context.Context) (int, error) { return 2, nil })
	require.NoError(t, err)
	require.True(t, replayed)

	var claimed, run, replay map[string]any
	for _, s := range exp.GetSpans().Snapshots() {
		sum := summarize(s, "")
		switch sum.attrs["idem.outcome"] {
		case idemotel.OutcomeClaimed:
			claimed = sum.attrs
		case idemotel.OutcomeRan:
			run = sum.attrs
		case idemotel.OutcomeReplayed:
			replay = sum.attrs
		}
	}
	require.NotNil(t, claimed)
	require.NotNil(t, run)
	require.NotNil(t, replay)
	lease := claimedAt.Add(idem.DefaultLease + idem.DefaultLeaseMargin) // no deadline: WithLease plus the margin
	assert.Equal(t, lease.Format(time.RFC3339Nano), claimed["idem.lease.end"], "the lease the claim took")
	assert.InDelta(t, 25.0, run["idem.handler.duration_ms"], 0, "the handler alone")
	assert.Equal(t, true, replay["idem.replay.cached"], "from the local cache")
}
