package idemotel_test

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-lambda-go/otellambda"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/sqs"
)

// The package documentation's usage in a Lambda function: idem's spans are children of
// the invocation's span from otellambda. It starts Lambda, so it claims no output.
func Example_deploy() {
	deploy := func(tp *sdktrace.TracerProvider, store idemstore.Store, credit func(context.Context, events.SQSMessage) error) error {
		tracer, err := idemotel.New(idemotel.WithTracerProvider(tp))
		if err != nil {
			return err
		}
		guard, err := idem.New(store, "credit-account", idem.WithHooks(tracer.Hooks()))
		if err != nil {
			return err
		}
		h, err := sqs.New(guard, credit) // its batches report through the guard's hooks
		if err != nil {
			return err
		}
		lambda.Start(otellambda.WrapHandler(lambda.NewHandler(h.Handle),
			otellambda.WithTracerProvider(tp), otellambda.WithFlusher(tp)))
		return nil
	}
	_ = deploy
}
