package kafkaconsumer_test

import (
	"os"
	"testing"

	"github.com/idemkit/idem/internal/ddblocal"
)

// The store tests also run on DynamoDB Local, started once for the test binary (skipped
// under -short).
func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }
