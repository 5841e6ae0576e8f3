package emf_test

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// stopped is a clock that never moves, so the examples' timestamps and durations can be
// checked.
var stopped = idem.ClockFunc(func() time.Time { return time.UnixMilli(1700000000000) })

// A guarded call and its retry, flushed as one document at the end of the invocation.
func Example() {
	rec, err := emf.New(os.Stdout, "Orders", emf.WithDimension("Service", "orders-api"), emf.WithClock(stopped))
	if err != nil {
		panic(err)
	}
	guard, err := idem.New(memstore.New(), "create-order", idem.WithHooks(rec.Hooks()), idem.WithClock(stopped))
	if err != nil {
		panic(err)
	}
	createOrder := func(context.Context) (string, error) { return "order-1", nil }
	for range 2 {
		_, _, _ = idem.Do(context.Background(), guard, idem.Request{Key: "key-1"}, createOrder)
	}
	_ = rec.Flush()
	// Output:
	// {"Claims":1,"Completions":1,"HandlerDuration":0,"Operation":"create-order","Replays":1,"RunDuration":0,"Service":"orders-api","_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"Orders","Dimensions":[["Service","Operation"]],"Metrics":[{"Name":"Claims","Unit":"Count"},{"Name":"Completions","Unit":"Count"},{"Name":"HandlerDuration","Unit":"Milliseconds"},{"Name":"RunDuration","Unit":"Milliseconds"},{"Name":"Replays","Unit":"Count"}]}]}}
}

// Each invocation of a wrapped handler writes its own document.
func ExampleWrap() {
	rec, err := emf.New(os.Stdout, "Orders", emf.WithClock(stopped))
	if err != nil {
		panic(err)
	}
	handler := emf.Wrap(rec, func(_ context.Context, order string) (string, error) {
		_ = rec.Count("OrdersPlaced", 1)
		return "placed " + order, nil
	})
	for _, order := range []string{"o-1", "o-2"} {
		_, _ = handler(context.Background(), order)
	}
	// Output:
	// {"OrdersPlaced":1,"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"Orders","Dimensions":[[]],"Metrics":[{"Name":"OrdersPlaced","Unit":"Count"}]}]}}
	// {"OrdersPlaced":1,"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"Orders","Dimensions":[[]],"Metrics":[{"Name":"OrdersPlaced","Unit":"Count"}]}]}}
}

// An SQS batch's outcomes by status and by failure reason, beside the guarded calls'
// metrics: the sqs handler reports its batches through the guard's hooks.
func Example_sqs() {
	rec, err := emf.New(os.Stdout, "Credits", emf.WithClock(stopped))
	if err != nil {
		panic(err)
	}
	guard, err := idem.New(memstore.New(), "credit-account", idem.WithHooks(rec.Hooks()), idem.WithClock(stopped))
	if err != nil {
		panic(err)
	}
	h, err := sqs.New(guard, func(_ context.Context, m events.SQSMessage) error {
		if m.Body == "" {
			return errors.New("empty body")
		}
		return nil
	}, sqs.WithConcurrency(1)) // one message at a time: the metrics' order is fixed
	if err != nil {
		panic(err)
	}
	const queue = "arn:aws:sqs:eu-west-1:123456789012:credits"
	_, _ = emf.Wrap(rec, h.Handle)(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: `{"amount_cents":100}`, EventSourceARN: queue},
		{MessageId: "m-2", Body: "", EventSourceARN: queue},
	}})
	// Output:
	// {"Claims":2,"Completions":1,"HandlerDuration":[0,0],"HandlerFailures":1,"Operation":"credit-account","RunDuration":[0,0],"SQSBatchDuration":0,"SQSBatches":1,"SQSDuplicates":0,"SQSFailed":1,"SQSFailedHandler":1,"SQSMessages":2,"SQSRan":1,"SQSReplayed":0,"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"Credits","Dimensions":[["Operation"]],"Metrics":[{"Name":"Claims","Unit":"Count"},{"Name":"Completions","Unit":"Count"},{"Name":"HandlerDuration","Unit":"Milliseconds"},{"Name":"RunDuration","Unit":"Milliseconds"},{"Name":"HandlerFailures","Unit":"Count"}]},{"Namespace":"Credits","Dimensions":[[]],"Metrics":[{"Name":"SQSBatches","Unit":"Count"},{"Name":"SQSMessages","Unit":"Count"},{"Name":"SQSRan","Unit":"Count"},{"Name":"SQSReplayed","Unit":"Count"},{"Name":"SQSDuplicates","Unit":"Count"},{"Name":"SQSFailed","Unit":"Count"},{"Name":"SQSFailedHandler","Unit":"Count"},{"Name":"SQSBatchDuration","Unit":"Milliseconds"}]}]}}
}

// A metric of the function's own in the same document as idem's.
func ExampleRecorder_Count() {
	rec, err := emf.New(os.Stdout, "Orders", emf.WithClock(stopped))
	if err != nil {
		panic(err)
	}
	_ = rec.Count("OrdersPlaced", 1)
	_ = rec.Count("OrdersPlaced", 1)
	_ = rec.Observe("BasketSize", emf.UnitCount, 3)
	_ = rec.Flush()
	// Output:
	// {"BasketSize":3,"OrdersPlaced":2,"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"Orders","Dimensions":[[]],"Metrics":[{"Name":"OrdersPlaced","Unit":"Count"},{"Name":"BasketSize","Unit":"Count"}]}]}}
}
