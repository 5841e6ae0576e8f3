package lambdaenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem/emf"
)

// Wiring is what a batch function's handler is built from: the container's one DynamoDB
// client, its tables, its logger and its metrics recorder.
type Wiring struct {
	// Client is created before the first invocation and reused by all.
	Client *dynamodb.Client
	// Tables holds the values of the required variables, in the order given to RunBatch.
	Tables []string
	// Logger writes JSON lines with each invocation's request ID.
	Logger *slog.Logger
	// Metrics records idem's metrics; see [emf.Wrap] for flushing.
	Metrics *emf.Recorder
}

// RunBatch runs the batch function named name (example-sqs), whose events kind names in
// errors ("SQS"). The variables tables names are required. It builds the handler with
// wire, and wraps it with [emf.Wrap]: one metrics document per invocation, to standard
// output in Lambda, where CloudWatch Logs extracts them, and to standard error outside it.
// In Lambda it starts the handler and does not return; outside it, it processes one event
// as [ProcessLocal] says, with the program's arguments, until SIGINT or SIGTERM.
func RunBatch[E, R any](name, kind string, logger *slog.Logger, tables []string, wire func(Wiring) (func(context.Context, E) (R, error), error)) error {
	values, err := Require(tables...)
	if err != nil {
		return err
	}
	client, err := DynamoDB(context.Background(), logger)
	if err != nil {
		return err
	}
	metricsOut := os.Stderr
	if InLambda() {
		metricsOut = os.Stdout
	}
	metrics, err := Metrics(metricsOut, name)
	if err != nil {
		return err
	}
	h, err := wire(Wiring{Client: client, Tables: values, Logger: logger, Metrics: metrics})
	if err != nil {
		return err
	}
	handle := emf.Wrap(metrics, h)
	if InLambda() {
		lambda.Start(handle)
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return ProcessLocal(LocalContext(ctx), name, kind, handle, os.Args[1:], os.Stdin, os.Stdout)
}

// ProcessLocal processes one event of kind ("SQS") with h, read from the file args names,
// or from stdin if none or "-", and writes the response to out as indented JSON. A second
// argument is a usage error naming the command name.
func ProcessLocal[E, R any](ctx context.Context, name, kind string, h func(context.Context, E) (R, error), args []string, stdin io.Reader, out io.Writer) error {
	in := stdin
	switch {
	case len(args) > 1:
		return fmt.Errorf("usage: %s [event.json]", name)
	case len(args) == 1 && args[0] != "-":
		data, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		in = bytes.NewReader(data)
	}
	var event E
	if err := json.NewDecoder(in).Decode(&event); err != nil {
		return fmt.Errorf("read %s event: %w", kind, err)
	}
	resp, err := h(ctx, event)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(resp)
}
