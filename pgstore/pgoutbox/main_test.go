package pgoutbox_test

import (
	"os"
	"testing"

	"github.com/idemkit/idem/pgstore/pgstoretest"
)

// The binary's PostgreSQL, started once; without one the tests skip (fail with
// IDEM_REQUIRE_POSTGRES set).
func TestMain(m *testing.M) { os.Exit(pgstoretest.Main(m)) }
