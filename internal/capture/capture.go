// Package capture records everything a guard and its wrapper tell the outside world, for
// tests that search it: every log record at every level, with all its attributes, and
// every hook event, with all its fields and its error's text. Tests that must show a
// value (a caller's raw idempotency key, say) never leaves the process through a log line
// or a hook drive the code with an Output and search its text.
package capture

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/idemkit/idem"
)

// Output collects log records and hook events as text. The zero value is ready; it is
// safe for concurrent use.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p: the log handler's output, or anything else a test wants searched,
// such as the text of an error returned to the caller.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// Logger returns a logger that writes every record, DEBUG and up, to o as JSON, with its
// source position.
func (o *Output) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(o, &slog.HandlerOptions{Level: slog.LevelDebug, AddSource: true}))
}

// Hooks returns hooks that write every event to o, each field printed.
func (o *Output) Hooks() idem.Hooks {
	on := func(name string) func(context.Context, idem.Event) {
		return func(_ context.Context, e idem.Event) { o.printf("hook %s: %+v\n", name, e) }
	}
	return idem.Hooks{
		OnClaimed:    on("OnClaimed"),
		OnCompleted:  on("OnCompleted"),
		OnReplayed:   on("OnReplayed"),
		OnInProgress: on("OnInProgress"),
		OnMismatch:   on("OnMismatch"),
		OnLeaseLost:  on("OnLeaseLost"),
		OnReleased:   on("OnReleased"),
		OnStoreError: on("OnStoreError"),
		OnUnguarded:  on("OnUnguarded"),
		OnRun: func(ctx context.Context, e idem.Event) context.Context {
			o.printf("hook OnRun: %+v\n", e)
			return ctx
		},
		OnRunEnd: on("OnRunEnd"),
		OnBatch: func(_ context.Context, e idem.BatchEvent) {
			o.printf("hook OnBatch: %+v\n", e)
		},
	}
}

// Options returns the guard options that send the guard's logs and hooks to o.
func (o *Output) Options() []idem.Option {
	return []idem.Option{idem.WithLogger(o.Logger()), idem.WithHooks(o.Hooks())}
}

// Error appends the text of err (nil is skipped), for errors that reach the caller.
func (o *Output) Error(err error) {
	if err != nil {
		o.printf("returned: %v\n", err)
	}
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

func (o *Output) printf(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(&o.buf, format, args...)
}
