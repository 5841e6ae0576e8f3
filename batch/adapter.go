package batch

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// Settings are the options every source adapter offers its users, whatever the source:
// how many items or groups run at once, the deadline margin, and batch claims (the
// adapter's WithConcurrency, WithDeadlineMargin and WithBatchClaims, which set them as
// [WithConcurrency], [WithDeadlineMargin] and [WithBatchClaims] say). An adapter embeds
// Settings in its configuration, starts it from [DefaultSettings], and creates its engine
// with [NewAdapter]. The zero Settings is not valid.
type Settings struct {
	adapter     string
	concurrency int
	margin      time.Duration
	marginSet   bool
	batchClaims bool
	waitFlight  bool
}

// DefaultSettings returns the engine's defaults for the adapter named adapter (its
// package's name, which the errors of its options name: "kinesis").
func DefaultSettings(adapter string) Settings {
	d := defaultConfig()
	return Settings{adapter: adapter, concurrency: d.concurrency, margin: d.margin, batchClaims: d.batchClaims}
}

// BatchSettings returns s. It lets [NewAdapter] reach the Settings embedded in an
// adapter's configuration.
func (s *Settings) BatchSettings() *Settings { return s }

// OptionError returns an error wrapping [idem.ErrInvalidOption] that names the adapter
// and its option (or constructor): "idem: invalid option: kinesis: WithConcurrency: must
// be at least 1".
func (s *Settings) OptionError(option, msg string) error {
	return fmt.Errorf("%w: %s: %s: %s", idem.ErrInvalidOption, s.adapter, option, msg)
}

// SetConcurrency sets how many items or groups run at once, as [WithConcurrency] says,
// for the adapter's WithConcurrency. n must be at least 1.
func (s *Settings) SetConcurrency(n int) error {
	if n < 1 {
		return s.OptionError("WithConcurrency", "must be at least 1")
	}
	s.concurrency = n
	return nil
}

// SetDeadlineMargin sets the deadline margin, as [WithDeadlineMargin] says, for the
// adapter's WithDeadlineMargin. d must not be negative.
func (s *Settings) SetDeadlineMargin(d time.Duration) error {
	if d < 0 {
		return s.OptionError("WithDeadlineMargin", "must not be negative")
	}
	s.margin, s.marginSet = d, true
	return nil
}

// SetBatchClaims sets whether keys are claimed and outcomes recorded together, as
// [WithBatchClaims] says, for the adapter's WithBatchClaims.
func (s *Settings) SetBatchClaims(on bool) error {
	s.batchClaims = on
	return nil
}

// SetWaitInFlight sets whether an item whose key is in flight elsewhere waits for it, as
// [WithWaitInFlight] says, for the adapter's WithWaitInFlight.
func (s *Settings) SetWaitInFlight(on bool) error {
	s.waitFlight = on
	return nil
}

// options returns the engine options of s.
func (s *Settings) options() []Option {
	opts := []Option{WithConcurrency(s.concurrency), WithBatchClaims(s.batchClaims), WithWaitInFlight(s.waitFlight)}
	if s.marginSet {
		opts = append(opts, WithDeadlineMargin(s.margin))
	}
	return opts
}

// NewAdapter is the part of a source adapter's constructor (named ctor in errors: "New")
// that every adapter shares. It fails for a nil guard, or when handlerNil says the
// adapter's handler is nil; applies opts to cfg in order, skipping nil ones and stopping
// at the first error; and returns an engine for guard and src configured by the
// [Settings] cfg embeds. Its errors wrap [idem.ErrInvalidOption] and name the adapter.
//
//	cfg := defaultConfig() // with batch.DefaultSettings("kinesis") embedded
//	engine, err := batch.NewAdapter(guard, fn == nil, "New", source, &cfg, opts)
func NewAdapter[C any, P interface {
	*C
	BatchSettings() *Settings
}, O ~func(P) error](guard *idem.Guard, handlerNil bool, ctor string, src Source, cfg P, opts []O) (*Engine, error) {
	s := cfg.BatchSettings()
	if guard == nil {
		return nil, s.OptionError(ctor, "guard must not be nil")
	}
	if handlerNil {
		return nil, s.OptionError(ctor, "handler must not be nil")
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(cfg); err != nil {
			return nil, err
		}
	}
	return New(guard, src, s.options()...)
}

// Run is the flow every source adapter shares after decoding its event: it processes
// records, whose items are items (items[i] is records[i]'s), running fn for a record
// that is to run, and returns the report with each record's outcome mapped to the
// adapter's outcome type by outcome, in the records' order.
func Run[R, O any](ctx context.Context, e *Engine, records []R, items []Item, fn func(context.Context, R) error, mode Mode, outcome func(o Outcome, r R) O) (*Report, []O) {
	run := func(ctx context.Context, i int) error { return fn(ctx, records[i]) }
	rep := e.Process(ctx, items, run, mode)
	out := make([]O, len(rep.Outcomes))
	for i, o := range rep.Outcomes {
		out[i] = outcome(o, records[i])
	}
	return rep, out
}
