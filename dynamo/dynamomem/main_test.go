package dynamomem_test

import (
	"os"
	"testing"

	"github.com/idemkit/idem/internal/ddblocal"
)

// The repository's tests find DynamoDB Local where `make deps` installs it.
func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }
