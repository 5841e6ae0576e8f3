package main

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/pgserver"
)

// TestRun runs both measurements tiny, on a PostgreSQL it starts (or DATABASE_URL's): every
// event is published in each. A missing server skips it, or fails it with
// IDEM_REQUIRE_POSTGRES set.
func TestRun(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if _, err := pgserver.Locate(); url == "" && err != nil {
		if os.Getenv("IDEM_REQUIRE_POSTGRES") != "" {
			t.Fatalf("%v (IDEM_REQUIRE_POSTGRES is set)", err)
		}
		t.Skipf("%v: set DATABASE_URL to a server, or install PostgreSQL", err)
	}
	require.NoError(t, run(url, 20, 1000, 200, 2, 10, 3))
}

// TestRunDynamo runs both measurements tiny on DynamoDB Local (its own): every event is
// published in each. A missing DynamoDB Local skips it, or fails it with
// IDEM_REQUIRE_DYNAMODB set.
func TestRunDynamo(t *testing.T) {
	ddblocal.SkipShort(t)
	require.NoError(t, runDynamo("", 20, 1000, 200, 10, 3, 50*time.Millisecond, "dynamo"))
}
