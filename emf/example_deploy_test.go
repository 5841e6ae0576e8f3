package emf_test

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/sqs"
)

// The package documentation's usage in a Lambda function: one EMF document per
// invocation, with the guard's and the SQS batches' metrics. It starts Lambda, so it
// claims no output.
func Example_deploy() {
	deploy := func(store idemstore.Store, credit func(context.Context, events.SQSMessage) error) error {
		rec, err := emf.New(os.Stdout, "Credits", emf.WithDimension("Service", "credits"))
		if err != nil {
			return err
		}
		guard, err := idem.New(store, "credit-account", idem.WithHooks(rec.Hooks()))
		if err != nil {
			return err
		}
		h, err := sqs.New(guard, credit) // its batches report through the guard's hooks
		if err != nil {
			return err
		}
		lambda.Start(emf.Wrap(rec, h.Handle))
		return nil
	}
	_ = deploy
}
