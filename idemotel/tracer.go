package idemotel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
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
	// (completion or release): what [idem.Event.Duration] covers. With a batch
	// ([idem.Guard.Claim]) it ends when the batch is settled.
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
	// AttrScope is the stored key's scope: by default the function's name.
	AttrScope = attribute.Key("idem.scope")
	// AttrLeaseEnd is when the lease of the owner in flight ends (RFC 3339): the time after
	// which a refused request can succeed.
	AttrLeaseEnd = attribute.Key("idem.lease.end")
	// AttrStoreOp names the store operation that failed: claim, get, complete, release,
	// extend or checkpoint.
	AttrStoreOp = attribute.Key("idem.store.op")
	// AttrErrorType is the OpenTelemetry semantic convention's error.type: the Go type of
	// the error, never its message, which a handler may have filled with personal data.
	AttrErrorType = attribute.Key("error.type")
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
// refusals and failed claims; [SpanRun] for completions, releases, lost leases and failed
// completions or releases; [SpanExtend] and [SpanCheckpoint] for their failures;
// [SpanSQSBatch] for each SQS batch (package sqs reports its batches through the guard's
// OnBatch hook). A store
// error or a lost lease sets the span's status to Error and records the error (idem's and
// the store's messages carry no key); a release sets it to Error with the error's type only
// ([AttrErrorType]).
func (t *Tracer) Hooks() idem.Hooks {
	return idem.Hooks{
		OnClaimed:    t.hook(SpanClaim, OutcomeClaimed),
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

// span records the step e as a span that ends now and began e.Duration earlier.
func (t *Tracer) span(ctx context.Context, name, outcome string, e idem.Event) {
	end := t.clock.Now()
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, AttrOutcome.String(outcome))
	if scope, hash, ok := cutKey(e.Key); ok {
		attrs = append(attrs, AttrScope.String(scope), AttrKeyHash.String(hash))
	}
	if e.Op != "" {
		attrs = append(attrs, AttrStoreOp.String(e.Op))
	}
	var ip *idem.InProgressError
	if outcome == OutcomeInProgress && errors.As(e.Err, &ip) {
		attrs = append(attrs, AttrLeaseEnd.String(ip.LeaseExpires.UTC().Format(time.RFC3339Nano)))
	}
	_, s := t.tracer.Start(ctx, name, trace.WithTimestamp(end.Add(-e.Duration)),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	switch {
	case outcome == OutcomeStoreError || outcome == OutcomeLeaseLost:
		s.RecordError(e.Err, trace.WithTimestamp(end))
		s.SetStatus(codes.Error, outcome)
	case outcome == OutcomeReleased && e.Err != nil:
		// The handler failed, or (in a batch settled early) never started: the work was not
		// done, and a retry runs it.
		s.SetAttributes(AttrErrorType.String(fmt.Sprintf("%T", e.Err)))
		s.SetStatus(codes.Error, "not completed")
	}
	s.End(trace.WithTimestamp(end))
}

// cutKey splits a stored key "<scope>#<sha256 hex>" into its scope and hash. It reports
// false for any other form, so nothing but a hash is ever recorded.
func cutKey(key string) (scope, hash string, ok bool) {
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
