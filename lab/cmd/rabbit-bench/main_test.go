package main

import (
	"context"
	"os"
	"testing"

	"github.com/idemkit/idem/internal/pgserver"
	"github.com/idemkit/idem/internal/rabbitserver"
)

// TestRun runs every step tiny, on a broker and a PostgreSQL it starts: each checks that
// every message was acknowledged and its business row written once. A missing server skips
// it, or fails it with IDEM_REQUIRE_RABBITMQ or IDEM_REQUIRE_POSTGRES set.
func TestRun(t *testing.T) {
	if _, err := os.Stat(rabbitserver.Script); err != nil {
		if os.Getenv("IDEM_REQUIRE_RABBITMQ") != "" {
			t.Fatalf("%v (IDEM_REQUIRE_RABBITMQ is set)", err)
		}
		t.Skipf("no rabbitmq-server: %v", err)
	}
	if _, err := pgserver.Locate(); err != nil {
		if os.Getenv("IDEM_REQUIRE_POSTGRES") != "" {
			t.Fatalf("%v (IDEM_REQUIRE_POSTGRES is set)", err)
		}
		t.Skipf("no PostgreSQL: %v", err)
	}
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = out.Close() }()
	if err := run(context.Background(), options{messages: 50, prefetch: 10, conns: 4}, out); err != nil {
		t.Fatal(err)
	}
}
