package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"github.com/idemkit/idem/dynamo"
)

// errHelp ends a run that printed help on request: exit code 0.
var errHelp = errors.New("help")

// command holds the flags every command shares.
type command struct {
	fs    *flag.FlagSet
	store storeFlags
	json  bool
}

// newCommand returns the flag set of the named command with the table flags.
func newCommand(name string) *command {
	c := &command{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	c.fs.SetOutput(io.Discard) // errors are reported once, by app.exit
	c.fs.StringVar(&c.store.table, "table", "", "the idempotency table (default $IDEMPOTENCY_TABLE)")
	c.fs.StringVar(&c.store.store, "store", "", "the store as a URL: dynamodb://TABLE")
	c.fs.StringVar(&c.store.endpoint, "endpoint", "", "DynamoDB endpoint URL (default $AWS_ENDPOINT_URL_DYNAMODB, else AWS's)")
	c.fs.StringVar(&c.store.sortKey, "sort-key", "", "with a composite primary key: the sort key attribute holding the record key")
	c.fs.StringVar(&c.store.partition, "partition", "", "with --sort-key: the partition key value of every record")
	c.fs.BoolVar(&c.json, "json", false, "print JSON instead of text")
	return c
}

// keyFlags adds the flags that name one record.
func (c *command) keyFlags() *keyFlags {
	k := &keyFlags{}
	c.fs.StringVar(&k.scope, "scope", "", "the guard's scope (idem.WithScope; by default the Lambda function's name)")
	c.fs.StringVar(&k.operation, "operation", "", "the guard's operation, as given to idem.New")
	c.fs.StringVar(&k.key, "key", "", "the caller's raw idempotency key")
	c.fs.StringVar(&k.tenant, "tenant", "", `the tenant the key was scoped by, as the wrapper derived it ("sub:…", "iam:arn:…")`)
	c.fs.StringVar(&k.storedKey, "stored-key", "", "the stored key itself, <scope>.<operation>#<sha256 hex>, as logs print it")
	return k
}

// parse parses args; -h prints the command's help.
func (a *app) parse(c *command, args []string) error {
	err := c.fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		if err := a.say(usage); err != nil {
			return err
		}
		return errHelp
	case err != nil:
		return usageError("%s: %v (see idemctl help)", c.fs.Name(), err)
	case c.fs.NArg() > 0:
		return usageError("%s: unexpected argument %q (flags only; see idemctl help)", c.fs.Name(), c.fs.Arg(0))
	case (c.store.sortKey == "") != (c.store.partition == ""):
		return usageError("--sort-key and --partition go together")
	}
	return nil
}

// open connects to the table the flags name.
func (a *app) open(ctx context.Context, c *command) (*table, error) {
	name, err := c.store.tableName(a.getenv("IDEMPOTENCY_TABLE"))
	if err != nil {
		return nil, err
	}
	api, err := a.connect(ctx, c.store.endpoint)
	if err != nil {
		return nil, err
	}
	return &table{
		api:       api,
		name:      name,
		attrs:     dynamo.DefaultAttributes(),
		sortKey:   c.store.sortKey,
		partition: c.store.partition,
	}, nil
}
