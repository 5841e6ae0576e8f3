package idemotel_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-lambda-go/otellambda"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/memstore"
)

// order is the function's event.
type order struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

// A Lambda function instrumented with otellambda, invoked twice with one order: idem's spans
// are children of each invocation's span, and the retry's replay carries the first run's
// key hash. In Lambda, lambda.Start takes the instrumented handler and the provider
// exports to a collector; here an in-memory exporter shows the spans.
func Example_otellambda() {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	tracer, err := idemotel.New(idemotel.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	guard, err := idem.New(memstore.New(), "create-order", idem.WithScope("orders"), idem.WithHooks(tracer.Hooks()))
	if err != nil {
		panic(err)
	}
	place := func(ctx context.Context, o order) (string, error) {
		id, _, err := idem.Do(ctx, guard, idem.Request{Key: o.ID},
			func(context.Context) (string, error) { return "placed " + o.ID, nil })
		return id, err
	}
	handler := otellambda.WrapHandler(lambda.NewHandler(place),
		otellambda.WithTracerProvider(tp), otellambda.WithFlusher(tp))

	for _, request := range []string{"req-1", "req-2"} {
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{
			AwsRequestID:       request,
			InvokedFunctionArn: "arn:aws:lambda:eu-west-1:123456789012:function:orders",
		})
		out, err := handler.Invoke(ctx, []byte(`{"id":"order-7","cents":1250}`))
		fmt.Println(string(out), err)
	}

	spans := exporter.GetSpans()
	invocations := map[trace.SpanID]string{}
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindServer {
			for _, kv := range s.Attributes {
				if kv.Key == "faas.invocation_id" {
					invocations[s.SpanContext.SpanID()] = kv.Value.AsString()
				}
			}
		}
	}
	hashes := map[string]bool{}
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindServer {
			continue
		}
		var outcome string
		for _, kv := range s.Attributes {
			switch kv.Key {
			case idemotel.AttrOutcome:
				outcome = kv.Value.AsString()
			case idemotel.AttrKeyHash:
				hashes[kv.Value.AsString()] = true
			}
		}
		fmt.Printf("%s %s, in invocation %s\n", s.Name, outcome, invocations[s.Parent.SpanID()])
	}
	fmt.Println("distinct key hashes:", len(hashes))
	// Output:
	// "placed order-7" <nil>
	// "placed order-7" <nil>
	// idem.claim claimed, in invocation req-1
	// idem.run ran, in invocation req-1
	// idem.claim replayed, in invocation req-2
	// distinct key hashes: 1
}

// The spans of every guarded call go to the provider given, as children of the span in
// the call's context.
func ExampleNew() {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	tracer, err := idemotel.New(idemotel.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	guard, err := idem.New(memstore.New(), "create-order", idem.WithHooks(tracer.Hooks()))
	if err != nil {
		panic(err)
	}
	ctx, parent := tp.Tracer("app").Start(context.Background(), "POST /orders")
	_, _, _ = idem.Do(ctx, guard, idem.Request{Key: "k-1"}, func(context.Context) (int, error) { return 1, nil })
	parent.End()
	for _, s := range exporter.GetSpans() {
		fmt.Println(s.Name)
	}
	// Output:
	// idem.claim
	// idem.run
	// POST /orders
}
