package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/idemkit/idem/internal/termtext"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/pgoutbox"
)

// backlogJSON is what outbox lag prints with --json.
type backlogJSON struct {
	Table       string       `json:"table"`
	Unpublished int64        `json:"unpublished"`
	LagMillis   int64        `json:"lag_ms"`
	Oldest      *pendingJSON `json:"oldest,omitempty"`
}

type pendingJSON struct {
	ID          string    `json:"id"`
	OrderingKey string    `json:"ordering_key"`
	Destination string    `json:"destination"`
	Type        string    `json:"type"`
	Attempts    int       `json:"attempts"`
	LastError   string    `json:"last_error,omitempty"`
	CommittedAt time.Time `json:"committed_at"`
}

// lag prints the outbox's backlog: pgoutbox.ReadBacklog.
func (a *app) lag(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("outbox lag", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by app.exit
	store := fs.String("store", "", "the PostgreSQL connection string (default $DATABASE_URL)")
	table := fs.String("table", "", "the idempotency table (default $IDEMPOTENCY_TABLE, else idempotency)")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if err := a.say(usage); err != nil {
				return err
			}
			return errHelp
		}
		return usageError("outbox lag: %v (see idemctl-pg help)", err)
	}
	if fs.NArg() > 0 {
		return usageError("outbox lag: unexpected argument %q (flags only)", fs.Arg(0))
	}
	url := firstOf(*store, a.getenv("DATABASE_URL"))
	if url == "" {
		return usageError("name the database with --store postgres://... or DATABASE_URL")
	}
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") && !strings.Contains(url, "=") {
		return usageError("--store: want a postgres:// URL or a key=value connection string")
	}
	outbox := firstOf(*table, a.getenv("IDEMPOTENCY_TABLE"), pgstore.DefaultTable) + pgstore.OutboxSuffix

	db, closeDB, err := a.connect(ctx, url)
	if err != nil {
		return err
	}
	defer closeDB()
	b, err := pgoutbox.ReadBacklog(ctx, db, outbox)
	if err != nil {
		return fmt.Errorf("outbox %s: %w", outbox, err)
	}
	if *asJSON {
		return a.printJSON(outbox, b)
	}
	return a.say(text(outbox, b))
}

// text is the backlog as outbox lag prints it, values escaped for the terminal.
func text(table string, b pgoutbox.Backlog) string {
	var s strings.Builder
	fmt.Fprintf(&s, "outbox        %s\nunpublished   %d\nlag           %s\n", termtext.Display(table), b.Count, b.Lag.Round(time.Millisecond))
	if o := b.Oldest; o != nil {
		fmt.Fprintf(&s, "oldest        %s\n", termtext.Display(o.ID))
		fmt.Fprintf(&s, "  ordering key  %s\n", termtext.Display(o.OrderingKey))
		fmt.Fprintf(&s, "  destination   %s\n", termtext.Display(o.Destination))
		fmt.Fprintf(&s, "  type          %s\n", termtext.Display(o.Type))
		fmt.Fprintf(&s, "  committed     %s\n", o.CommittedAt.UTC().Format(time.RFC3339Nano))
		fmt.Fprintf(&s, "  attempts      %d\n", o.Attempts)
		if o.LastError != "" {
			fmt.Fprintf(&s, "  last error    %s\n", termtext.Display(o.LastError))
		}
	}
	return s.String()
}

func (a *app) printJSON(table string, b pgoutbox.Backlog) error {
	out := backlogJSON{Table: table, Unpublished: b.Count, LagMillis: b.Lag.Milliseconds()}
	if o := b.Oldest; o != nil {
		out.Oldest = &pendingJSON{ID: o.ID, OrderingKey: o.OrderingKey, Destination: o.Destination, Type: o.Type,
			Attempts: o.Attempts, LastError: o.LastError, CommittedAt: o.CommittedAt.UTC()}
	}
	doc, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	return a.say(string(termtext.EscapeJSON(doc)) + "\n")
}

// firstOf returns the first non-empty value.
func firstOf(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
