package emf

import "context"

// Wrap returns a Lambda handler that runs fn and then flushes r, so each invocation writes
// its metrics in one document (see [Recorder.Flush]) before Lambda may freeze the process.
// It returns fn's result and error unchanged: metrics must never fail or retry an
// invocation, so an error from writing them is dropped (standard output, where CloudWatch
// Logs reads them, does not fail in Lambda). Flushing runs even when fn panics.
func Wrap[In, Out any](r *Recorder, fn func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		defer func() { _ = r.Flush() }()
		return fn(ctx, in)
	}
}
