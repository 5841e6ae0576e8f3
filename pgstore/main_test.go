package pgstore_test

import (
	"os"
	"testing"

	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
