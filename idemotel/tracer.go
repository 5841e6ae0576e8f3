package idemotel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/idemkit/idem/idemotel"

// Span names.
const (
	// SpanClaim is the claim of a key and its answer: the key claimed, a stored result
	// replayed, the key in flight elsewhere, the key reused for another request, or a store
	// error (also of the polls of [idem.WithWait]).
	SpanClaim = "idem.claim"
	// SpanRun is the handler's run together with the store call that records its outcome
	// (completion or release). It starts just before the handler ([idem.Hooks.OnRun]) and
	// the handler runs on its context, so the spans the handler starts are its children;
	// it ends once the outcome is recorded ([idem.Hooks.OnRunEnd]): for a request of a
	// batch ([idem.Guard.Claim], as package sqs uses), when the batch is settled. One run
	// is one span, whatever its outcome.
	SpanRun = "idem.run"
	// SpanExtend is a failed lease extension of the heartbeat ([idem.WithHeartbeat]).
	SpanExtend = "idem.extend"
	// SpanCheckpoint is a failed carry-over of a checkpoint to a new lease.
	SpanCheckpoint = "idem.checkpoint"
	// SpanSQSBatch is one SQS batch, from its arrival to its response.
	SpanSQSBatch = "idem.sqs.batch"
)

// Attribute keys.
const (
	// AttrOutcome is what the step came to: one of the Outcome* values.
	AttrOutcome = attribute.Key("idem.outcome")
	// AttrKeyHash is the stored key's SHA-256 (hex) of the tenant and the caller's key: the
	// same for every retry of one operation, and never the key itself.
	AttrKeyHash = attribute.Key("idem.key.hash")
	// AttrScope is the stored key's scope ([idem.WithScope]): by default the function's
	// name.
	AttrScope = attribute.Key("idem.scope")
	// AttrOperation is the stored key's operation, the name given to [idem.New].
	AttrOperation = attribute.Key("idem.operation")
	// AttrLeaseEnd is when a lease ends (RFC 3339): on a refusal, the lease of the owner in
	// flight, after which a refused request can succeed; on a claim, the lease just taken
	// ([idem.Event.LeaseExpires]).
	AttrLeaseEnd = attribute.Key("idem.lease.end")
	// AttrReplayCached reports, on a replay, whether the result came from the guard's local
	// cache ([idem.WithCache]; true) or from the store (false).
	AttrReplayCached = attribute.Key("idem.replay.cached")
	// AttrHandlerDuration is, on a run, how long the handler ran in milliseconds, without
	// the store call that recorded its outcome ([idem.Event.HandlerDuration]).
	AttrHandlerDuration = attribute.Key("idem.handler.duration_ms")
	// AttrStoreOp names the store operation that failed: claim, get, complete, release,
	// extend or checkpoint.
	AttrStoreOp = attribute.Key("idem.store.op")
	// AttrErrorType is the OpenTelemetry semantic convention's error.type: what kind of
	// failure it was, never the error's message, which a handler may have filled with
	// personal data. It is the idem sentinel the error matches ([idem.ErrorType], such as
	// "idem.ErrLeaseLost"), else the Go type of the outermost error in its chain that is
	// not a plain errors.New or fmt.Errorf value (such as "*pgconn.PgError"), else
	// "_OTHER".
	AttrErrorType = semconv.ErrorTypeKey
)

// Outcomes, the values of [AttrOutcome].
const (
	OutcomeClaimed    = "claimed"     // the key was claimed; the handler runs
	OutcomeRan        = "ran"         // the handler ran and its result was stored
	OutcomeReplayed   = "replayed"    // a stored result was replayed
	OutcomeInProgress = "in_progress" // refused: the key is in flight elsewhere
	OutcomeMismatch   = "mismatch"    // refused: the key was used for another request
	OutcomeReleased   = "released"    // the handler failed and the key was released
	OutcomeLeaseLost  = "lease_lost"  // the lease was taken over before the outcome was recorded
	OutcomeStoreError = "store_error" // a store operation failed
)

// Tracer makes spans from idem's hooks. It is safe for concurrent use.
type Tracer struct {
	tracer trace.Tracer
	clock  idem.Clock
}

// Option configures a [Tracer].
type Option func(*config) error

type config struct {
	provider trace.TracerProvider
	clock    idem.Clock
}

// WithTracerProvider sets where spans go. Default: the global provider
// (otel.GetTracerProvider) at the time of [New]. Must not be nil.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return errors.New("idemotel: WithTracerProvider: must not be nil")
		}
		c.provider = tp
		return nil
	}
}

// WithClock sets the clock that dates the spans, for tests; give it the guard's clock
// ([idem.WithClock]), whose readings measure the durations. Default: the system clock.
// Must not be nil.
func WithClock(clock idem.Clock) Option {
	return func(c *config) error {
		if clock == nil {
			return errors.New("idemotel: WithClock: must not be nil")
		}
		c.clock = clock
		return nil
	}
}

// New returns a Tracer. Invalid settings return an error naming the option.
func New(opts ...Option) (*Tracer, error) {
	cfg := config{clock: idem.ClockFunc(time.Now)}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.provider == nil {
		cfg.provider = otel.GetTracerProvider()
	}
	return &Tracer{tracer: cfg.provider.Tracer(ScopeName), clock: cfg.clock}, nil
}

// Hooks returns the [idem.Hooks] that make the spans: [SpanClaim] for claims, replays,
// refusals and failed claims; [SpanRun] for each run of a handler, from OnRun to OnRunEnd,
// with the outcome its completion, release, lost lease or failed completion or release
// reported; [SpanExtend] and [SpanCheckpoint] for their failures; [SpanSQSBatch] for each
// SQS batch (package sqs reports its batches through the guard's OnBatch hook). A store
// error or a lost lease sets the span's status to Error and records the error (idem's and
// the store's messages carry no key); a release sets it to Error with the error's type only
// ([AttrErrorType]). To combine them with other hooks, use [idem.JoinHooks].
func (t *Tracer) Hooks() idem.Hooks {
	return idem.Hooks{
		OnClaimed:    t.hook(SpanClaim, OutcomeClaimed),
		OnRun:        t.startRun,
		OnRunEnd:     t.endRun,
		OnReplayed:   t.hook(SpanClaim, OutcomeReplayed),
		OnInProgress: t.hook(SpanClaim, OutcomeInProgress),
		OnMismatch:   t.hook(SpanClaim, OutcomeMismatch),
		OnCompleted:  t.hook(SpanRun, OutcomeRan),
		OnReleased:   t.hook(SpanRun, OutcomeReleased),
		OnLeaseLost:  t.hook(SpanRun, OutcomeLeaseLost),
		OnStoreError: func(ctx context.Context, e idem.Event) {
			t.span(ctx, storeSpan(e.Op), OutcomeStoreError, e)
		},
		OnBatch: t.batch,
	}
}

func (t *Tracer) hook(name, outcome string) func(context.Context, idem.Event) {
	return func(ctx context.Context, e idem.Event) { t.span(ctx, name, outcome, e) }
}

// runKey is the context key of the run a [Tracer] started; each Tracer has its own, so
// that two tracers joined on one guard each end their own span.
type runKey struct{ t *Tracer }

// run is a [SpanRun] in flight, from OnRun to OnRunEnd.
type run struct {
	span trace.Span
	mu   sync.Mutex
	done bool // ended: later reports make spans of their own
}

// startRun starts the [SpanRun] of a run about to start (the OnRun hook) and returns the
// handler's context, which carries it.
func (t *Tracer) startRun(ctx context.Context, e idem.Event) context.Context {
	ctx, s := t.tracer.Start(ctx, SpanRun, trace.WithTimestamp(t.clock.Now()),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(keyAttrs(nil, e.Key)...))
	return context.WithValue(ctx, runKey{t}, &run{span: s})
}

// endRun ends the [SpanRun] that startRun put in ctx (the OnRunEnd hook), with the
// handler's duration.
func (t *Tracer) endRun(ctx context.Context, e idem.Event) {
	r, _ := ctx.Value(runKey{t}).(*run)
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		r.done = true
		r.span.SetAttributes(AttrHandlerDuration.Float64(millis(e.HandlerDuration)))
		r.span.End(trace.WithTimestamp(t.clock.Now()))
	}
}

// millis returns d in milliseconds, with microsecond precision.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// storeSpan names the span of a failed store operation after the step it belongs to.
func storeSpan(op string) string {
	switch op {
	case "complete", "release":
		return SpanRun
	case "extend":
		return SpanExtend
	case "checkpoint":
		return SpanCheckpoint
	default: // claim, get
		return SpanClaim
	}
}

// span records the step e. A report on the run in ctx (a [SpanRun] that startRun began)
// sets that span's outcome; anything else is a span of its own that ends now and began
// e.Duration earlier (a run reported without OnRun: by a guard whose hooks joined the
// tracer's outcome hooks but not its OnRun).
func (t *Tracer) span(ctx context.Context, name, outcome string, e idem.Event) {
	end := t.clock.Now()
	if name == SpanRun {
		if r, _ := ctx.Value(runKey{t}).(*run); r != nil {
			r.mu.Lock()
			defer r.mu.Unlock()
			if !r.done {
				setOutcome(r.span, outcome, e, end)
				return
			}
		}
	}
	attrs := keyAttrs(make([]attribute.KeyValue, 0, 6), e.Key)
	var ip *idem.InProgressError
	switch {
	case outcome == OutcomeInProgress && errors.As(e.Err, &ip):
		attrs = append(attrs, AttrLeaseEnd.String(ip.LeaseExpires.UTC().Format(time.RFC3339Nano)))
	case outcome == OutcomeClaimed && !e.LeaseExpires.IsZero():
		attrs = append(attrs, AttrLeaseEnd.String(e.LeaseExpires.UTC().Format(time.RFC3339Nano)))
	case outcome == OutcomeReplayed:
		attrs = append(attrs, AttrReplayCached.Bool(e.FromCache))
	}
	if name == SpanRun && e.Op == "" { // a run reported after the fact, with its handler's time
		attrs = append(attrs, AttrHandlerDuration.Float64(millis(e.HandlerDuration)))
	}
	_, s := t.tracer.Start(ctx, name, trace.WithTimestamp(end.Add(-e.Duration)),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	setOutcome(s, outcome, e, end)
	s.End(trace.WithTimestamp(end))
}

// setOutcome sets the outcome of step e, reported at end, on s: the last report of a run
// is its outcome, and an error reported earlier (a lease the watchdog found lost) stays
// recorded on it.
func setOutcome(s trace.Span, outcome string, e idem.Event, end time.Time) {
	s.SetAttributes(AttrOutcome.String(outcome))
	if e.Op != "" {
		s.SetAttributes(AttrStoreOp.String(e.Op))
	}
	switch {
	case outcome == OutcomeStoreError || outcome == OutcomeLeaseLost:
		s.SetAttributes(AttrErrorType.String(errorType(e.Err)))
		s.RecordError(e.Err, trace.WithTimestamp(end))
		s.SetStatus(codes.Error, outcome)
	case outcome == OutcomeReleased && e.Err != nil:
		// The handler failed, or (in a batch settled early) never started: the work was not
		// done, and a retry runs it.
		s.SetAttributes(AttrErrorType.String(errorType(e.Err)))
		s.SetStatus(codes.Error, "not completed")
	}
}

// keyAttrs appends to attrs the attributes of the stored key: its scope, operation and
// hash, and nothing for a key of any other form.
func keyAttrs(attrs []attribute.KeyValue, key string) []attribute.KeyValue {
	prefix, hash, ok := cutKey(key)
	if !ok {
		return attrs
	}
	// The operation holds no '.', and the scope may: the operation follows the last one.
	if i := strings.LastIndexByte(prefix, '.'); i >= 0 {
		return append(attrs, AttrScope.String(prefix[:i]), AttrOperation.String(prefix[i+1:]), AttrKeyHash.String(hash))
	}
	return append(attrs, AttrScope.String(prefix), AttrKeyHash.String(hash))
}

// errorType returns the value of [AttrErrorType] for err.
func errorType(err error) string {
	if name := idem.ErrorType(err); name != "" {
		return name
	}
	if name := typedError(err); name != "" {
		return name
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

// typedError returns the Go type of the outermost error in err's chain (depth first) that
// is not a plain errors.New, fmt.Errorf or errors.Join value; "" if there is none.
func typedError(err error) string {
	for err != nil {
		name := fmt.Sprintf("%T", err)
		switch name {
		case "*errors.errorString", "*fmt.wrapError", "*fmt.wrapErrors", "*errors.joinError":
		default:
			return name
		}
		switch u := err.(type) { //nolint:errorlint // walking the chain by hand, one link at a time
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if name := typedError(e); name != "" {
					return name
				}
			}
			return ""
		default:
			return ""
		}
	}
	return ""
}

// cutKey splits a stored key "<scope>.<operation>#<sha256 hex>" into its prefix and hash.
// It reports false for any other form, so nothing but a hash is ever recorded.
func cutKey(key string) (prefix, hash string, ok bool) {
	i := strings.LastIndexByte(key, '#')
	if i < 0 || len(key)-i-1 != 64 {
		return "", "", false
	}
	hash = key[i+1:]
	for _, c := range hash {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", "", false
		}
	}
	return key[:i], hash, true
}
