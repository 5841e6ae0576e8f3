// Command devserver is what `make run` runs: it starts DynamoDB Local as the tests do
// (internal/ddblocal; DYNAMODB_ENDPOINT names one already running instead), creates the
// tables from infra/template.yaml, serves the example-api binary given by -api on
// 127.0.0.1:$PORT (default 3000), and prints a pair of curl commands that shows the replay.
// SIGINT (Ctrl-C) or SIGTERM stops the API and then DynamoDB Local, if devserver started it:
// a DynamoDB named by DYNAMODB_ENDPOINT keeps running.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/samtables"
)

// tables names the local tables, by their logical ID in the template.
var tables = map[string]string{
	"IdempotencyTable": "idempotency",
	"OrdersTable":      "orders",
	"LedgerTable":      "ledger",
}

// stopTimeout bounds how long the API gets to finish its requests after SIGTERM.
const stopTimeout = 30 * time.Second

func main() {
	api := flag.String("api", "", "path of the example-api binary to serve")
	flag.Parse()
	if *api == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: devserver -api path/to/example-api")
		os.Exit(2)
	}
	if err := run(*api, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
}

func run(apiBin string, out io.Writer) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	endpoint := os.Getenv(ddblocal.EnvEndpoint)
	if endpoint == "" {
		// A progress note: nothing to do if it is lost.
		_, _ = fmt.Fprintln(out, "Starting DynamoDB Local ...")
		server, err := ddblocal.Start(ctx)
		if err != nil {
			return err
		}
		defer func() {
			if stopErr := server.Stop(); stopErr != nil && err == nil {
				err = stopErr
			}
		}()
		endpoint = server.Endpoint()
	}
	if err := createTables(ctx, ddblocal.NewClient(endpoint)); err != nil {
		return err
	}

	port := os.Getenv("PORT")
	if port == "" {
		port = "3000"
	}
	api := exec.Command(apiBin)
	api.Env = append(os.Environ(),
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_SESSION_TOKEN=",
		"AWS_PROFILE=",
		"AWS_LAMBDA_RUNTIME_API=",
		"AWS_ENDPOINT_URL_DYNAMODB="+endpoint,
		"IDEMPOTENCY_TABLE="+tables["IdempotencyTable"],
		"ORDERS_TABLE="+tables["OrdersTable"],
		"PORT="+port,
	)
	api.Stdout, api.Stderr = os.Stderr, os.Stderr // its JSON log lines, apart from the banner
	api.SysProcAttr = sysProcAttr()
	if err := api.Start(); err != nil {
		return fmt.Errorf("start %s: %w", apiBin, err)
	}
	exited := waitExit(api)

	base := "http://localhost:" + port
	if err := waitReady(ctx, "http://"+net.JoinHostPort("127.0.0.1", port)+"/orders/none", exited); err != nil {
		return errors.Join(err, stopAPI(api, exited))
	}
	own := os.Getenv(ddblocal.EnvEndpoint) == ""
	printBanner(out, endpoint, base, own)

	select {
	case <-exited.done:
		return fmt.Errorf("example-api exited: %w", exited.err)
	case <-ctx.Done():
	}
	// A progress note: nothing to do if it is lost.
	_, _ = fmt.Fprintf(out, "\nStopping %s ...\n", stopping(endpoint, own))
	return stopAPI(api, exited)
}

// stopping names what Ctrl-C stops: only what devserver started, never a DynamoDB that
// DYNAMODB_ENDPOINT named.
func stopping(endpoint string, own bool) string {
	if own {
		return "example-api and DynamoDB Local"
	}
	return "example-api (DynamoDB at " + endpoint + " keeps running)"
}

// createTables creates the template's tables that do not exist yet. DynamoDB Local started
// here is empty; one named by DYNAMODB_ENDPOINT may have them from an earlier run.
func createTables(ctx context.Context, client *dynamodb.Client) error {
	missing := map[string]string{}
	for id, name := range tables {
		_, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		var notFound *types.ResourceNotFoundException
		switch {
		case errors.As(err, &notFound):
			missing[id] = name
		case err != nil:
			return fmt.Errorf("describe table %s: %w", name, err)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return samtables.CreateTables(ctx, client, missing)
}

// exit is a process's end, seen by any number of waiters: done is closed once err is set.
type exit struct {
	done chan struct{}
	err  error
}

// waitExit waits for cmd, started, in a goroutine of its own.
func waitExit(cmd *exec.Cmd) *exit {
	e := &exit{done: make(chan struct{})}
	go func() {
		e.err = cmd.Wait()
		close(e.done)
	}()
	return e
}

// waitReady polls url until the API answers, it exits, or ctx ends.
func waitReady(ctx context.Context, url string, exited *exit) error {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		if resp, err := client.Get(url); err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case <-exited.done:
			return fmt.Errorf("example-api exited before answering: %w", exited.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("example-api did not answer on %s", url)
		case <-tick.C:
		}
	}
}

// stopAPI sends SIGTERM to the API by its process id and waits for it to exit, killing it
// if it takes longer than stopTimeout. An API that has exited already is left alone: its
// exit is the caller's to report.
func stopAPI(api *exec.Cmd, exited *exit) error {
	select {
	case <-exited.done:
		return nil
	default:
	}
	if err := api.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop example-api (pid %d): %w", api.Process.Pid, err)
	}
	select {
	case <-exited.done:
		return exited.err
	case <-time.After(stopTimeout):
		_ = api.Process.Kill()
		<-exited.done // its error is the kill's own "signal: killed"
		return fmt.Errorf("example-api (pid %d) did not stop within %s; killed", api.Process.Pid, stopTimeout)
	}
}

// printBanner says where everything runs and how to see a replay; own tells whether
// devserver started the DynamoDB at endpoint.
func printBanner(out io.Writer, endpoint, base string, own bool) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := "demo-" + hex.EncodeToString(b[:])
	curl := fmt.Sprintf(`curl -si -X POST %s/orders -H 'Content-Type: application/json' -H 'Idempotency-Key: %s' -d '{"sku":"WIDGET-42","quantity":2,"amount_cents":1250}'`, base, key)
	_, _ = fmt.Fprintf(out, `
DynamoDB Local  %s  (tables %s, %s, %s from %s)
example-api     %s  (POST /orders, GET /orders/{id})

Run this twice: the first call creates the order (201); the second replays the same
response, byte for byte, with "Idempotent-Replayed: true", and creates nothing.

  %s
  %s

Then GET /orders/<id from the response>. In another terminal, the SQS example against the
same DynamoDB Local; it prints the batch response (one invalid message fails):

  AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local \
  AWS_ENDPOINT_URL_DYNAMODB=%s IDEMPOTENCY_TABLE=%s LEDGER_TABLE=%s \
  go run ./cmd/example-sqs cmd/example-sqs/testdata/sqs-credits-with-duplicates.json

Ctrl-C stops %s.
`, endpoint, tables["IdempotencyTable"], tables["OrdersTable"], tables["LedgerTable"], samtables.Source,
		base, curl, curl, endpoint, tables["IdempotencyTable"], tables["LedgerTable"], stopping(endpoint, own))
}
