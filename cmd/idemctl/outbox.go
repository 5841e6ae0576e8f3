package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
)

// pgTool is the command that reads a PostgreSQL outbox: pgstore/cmd/idemctl-pg, in the
// pgstore module, so that idemctl's module never requires pgx.
const pgTool = "idemctl-pg"

// toolExit is the exit code of a command idemctl ran, which printed its own output.
type toolExit int

func (e toolExit) Error() string { return fmt.Sprintf("%s exited with %d", pgTool, int(e)) }

// ddbLagHint is what outbox lag says about a DynamoDB outbox.
const ddbLagHint = `On DynamoDB the outbox is a table whose stream feeds the relay, a Lambda function on
that stream: unpublished events are stream records, not items idemctl could read. The
outbox's lag is the relay's: Lambda's IteratorAge metric of the relay function
(CloudWatch, namespace AWS/Lambda, dimension FunctionName; the age of the newest record
it has read, alarm when it grows), and the lag hook of the relay (which also reports the
oldest event's age as the relay sees it). A stream keeps records for 24 hours: a relay
stuck longer than that loses events, so alarm well before.
For a PostgreSQL outbox: idemctl outbox lag --store postgres://USER@HOST/DB [--table T]`

// outbox runs `idemctl outbox lag`: for a PostgreSQL store (--store postgres://…) it runs
// idemctl-pg with the same arguments; for DynamoDB it explains where the lag is.
func (a *app) outbox(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "lag" {
		return usageError("outbox: want outbox lag (see idemctl help)")
	}
	c := newCommand("outbox lag")
	if err := a.parse(c, args[1:]); err != nil {
		return err
	}
	if u, err := url.Parse(c.store.store); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return a.runTool(ctx, append([]string{"outbox"}, args...))
	}
	if _, err := c.store.tableName(a.getenv("IDEMPOTENCY_TABLE")); err != nil {
		return err
	}
	return hinted{err: usageError("outbox lag: a DynamoDB outbox has no backlog idemctl can read"), hint: ddbLagHint}
}

// runTool runs idemctl-pg with args, its output idemctl's, and returns its exit code as
// a toolExit (nil for 0).
func (a *app) runTool(ctx context.Context, args []string) error {
	path, err := a.findTool(pgTool)
	if err != nil {
		return hinted{err: fmt.Errorf("%s not found beside idemctl or on PATH: %w", pgTool, err),
			hint: "It reads PostgreSQL outboxes, from the pgstore module (so idemctl's never requires pgx).\n" +
				"Build it beside idemctl: cd pgstore && go build -o DIR ./cmd/idemctl-pg"}
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = a.stdout, a.stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return toolExit(exit.ExitCode())
	}
	return fmt.Errorf("run %s: %w", pgTool, err)
}

// findTool returns the path of the command name: beside idemctl's executable, else on
// PATH.
func findTool(name string) (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return exec.LookPath(name)
}
