// Package idemotel traces idem's guarded calls with OpenTelemetry: spans for the claim, the
// handler's run with the store call that records its outcome, and each SQS batch, with the
// attributes an operator filters on. It lives in its own module, so a program that does not
// trace never pulls OpenTelemetry in.
//
// # Mental model
//
// idem reports each step of a guarded call to its hooks when the step ends, with how long
// it took ([idem.Event]). A [Tracer] turns each report into a span that ends then and
// starts that long before, a child of the span in the call's context: the Lambda
// invocation's span when the handler is instrumented with otellambda
// (go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-lambda-go/otellambda), or
// an HTTP server span. The handler's run is the exception: its span, [SpanRun], starts
// before the handler ([idem.Hooks.OnRun]) and the handler runs on its context, so the
// spans the handler starts are its children; the reports of the run's outcome complete it.
// Every span carries the outcome ("idem.outcome": claimed, ran, replayed, in_progress,
// mismatch, released, lease_lost, store_error), the key's scope and operation
// ("idem.scope", "idem.operation") and the stored key's hash ("idem.key.hash"), never the
// caller's key, which may be personal data. The hash is the same for every retry of one
// logical operation, so one query on it finds them all, across invocations and containers.
//
//	tracer, err := idemotel.New(idemotel.WithTracerProvider(tp))
//	// ...
//	guard, err := idem.New(store, "credit-account", idem.WithHooks(tracer.Hooks()))
//	// ...
//	h, err := sqs.New(guard, credit) // its batches report through the guard's hooks
//	// ...
//	lambda.Start(otellambda.WrapHandler(lambda.NewHandler(h.Handle),
//		otellambda.WithTracerProvider(tp), otellambda.WithFlusher(tp)))
//
// With metrics too (package emf, say), join the hooks:
// idem.WithHooks(idem.JoinHooks(rec.Hooks(), tracer.Hooks())).
//
// See https://opentelemetry.io/docs/languages/go/ and
// https://docs.aws.amazon.com/lambda/latest/dg/golang-tracing.html.
package idemotel
