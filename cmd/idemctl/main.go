// Command idemctl inspects and repairs idem's idempotency records in DynamoDB: the
// operator's tool for a stuck key.
//
//	idemctl show    --table T --scope S --operation O --key K [--tenant X]   the record of one key
//	idemctl show    --table T --stored-key 'S.O#<sha256>'    the same, by the key the logs print
//	idemctl find    --table T --key K [--tenant X]   a raw key's records, any scope and operation
//	idemctl list    --table T [--state in-progress|lease-ended|all] [--scope S] [--limit N]
//	idemctl release --table T --scope S --operation O --key K [--yes]   end a dead owner's lease
//	idemctl delete  --table T --scope S --operation O --key K [--yes]   forget a completed result
//	idemctl outbox lag --store postgres://…   a PostgreSQL outbox's lag (runs idemctl-pg)
//
// It is read-only unless asked to release or delete, and every change is conditional on
// the record being exactly as idemctl showed it. Run `idemctl help` for the details.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem/internal/termtext"
)

// Exit codes.
const (
	exitOK       = 0 // done
	exitFailed   = 1 // DynamoDB or the configuration failed, or the output could not be written
	exitUsage    = 2 // bad command line, or a change asked for without a way to confirm it
	exitNotFound = 3 // no record under the key
	exitRefused  = 4 // the change was refused: not confirmed, not applicable, or the record changed
)

// errNotFound and errRefused select exit codes 3 and 4.
var (
	errNotFound = errors.New("not found")
	errRefused  = errors.New("refused")
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := &app{
		stdin:    os.Stdin,
		stdout:   os.Stdout,
		stderr:   os.Stderr,
		getenv:   os.Getenv,
		now:      time.Now,
		isTTY:    func() bool { return isTerminal(os.Stdin) },
		connect:  connect,
		findTool: findTool,
	}
	code := a.run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// app is one run of idemctl, with everything it touches outside itself.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	now    func() time.Time
	// isTTY reports whether stdin is a terminal a person can type a confirmation on.
	isTTY func() bool
	// connect returns the DynamoDB client; endpoint is --endpoint, or "" for the SDK's own
	// configuration (which reads AWS_ENDPOINT_URL_DYNAMODB).
	connect func(ctx context.Context, endpoint string) (API, error)
	// findTool returns the path of a command idemctl runs (idemctl-pg).
	findTool func(name string) (string, error)
}

// connect returns a DynamoDB client configured as the AWS SDK reads the environment and
// shared configuration (region, credentials, AWS_ENDPOINT_URL_DYNAMODB), with endpoint
// overriding the endpoint when set.
func connect(ctx context.Context, endpoint string) (API, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region: set AWS_REGION or a profile's region")
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = &endpoint
		}
	}), nil
}

// run runs the command line args and returns the exit code.
func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		a.note("%s", usage)
		return exitUsage
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "show":
		err = a.show(ctx, rest)
	case "find":
		err = a.find(ctx, rest)
	case "list":
		err = a.list(ctx, rest)
	case "release":
		err = a.change(ctx, actionRelease, rest)
	case "delete":
		err = a.change(ctx, actionDelete, rest)
	case "outbox":
		err = a.outbox(ctx, rest)
	case "help", "-h", "-help", "--help":
		err = a.say(usage)
	default:
		err = usageError("unknown command %q (show, find, list, release, delete, outbox, help)", cmd)
	}
	return a.exit(err)
}

// exit prints err, if any, and returns its exit code.
func (a *app) exit(err error) int {
	if err == nil {
		return exitOK
	}
	code := exitFailed
	var tool toolExit
	switch {
	case errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &tool):
		return int(tool) // the tool printed its own error
	case errors.Is(err, errUsage):
		code = exitUsage
	case errors.Is(err, errNotFound):
		code = exitNotFound
	case errors.Is(err, errRefused):
		code = exitRefused
	}
	a.note("idemctl: %s\n", termtext.Escaped(err.Error()))
	var h hinted
	if errors.As(err, &h) {
		for _, line := range strings.Split(h.hint, "\n") {
			a.note("%s\n", termtext.Escaped(line))
		}
	}
	return code
}

// hinted is an error followed, on lines of their own, by what to check or try next.
type hinted struct {
	err  error
	hint string
}

// Error returns the error's message, without the hint.
func (h hinted) Error() string { return h.err.Error() }

// Unwrap returns the error, so errors.Is finds errNotFound in it.
func (h hinted) Unwrap() error { return h.err }

// say writes s to stdout. An error means the output was lost: the command fails with it,
// so a script reading the output never takes a lost answer for an empty one.
func (a *app) say(s string) error {
	if _, err := io.WriteString(a.stdout, s); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// note writes a message for the operator to stderr. A failed write there is dropped:
// stderr is where idemctl reports failures, so nothing is left to report it on.
func (a *app) note(format string, args ...any) {
	_, _ = fmt.Fprintf(a.stderr, format, args...)
}
