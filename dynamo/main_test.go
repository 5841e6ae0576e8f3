package dynamo_test

import (
	"os"
	"testing"

	"github.com/idemkit/idem/internal/ddblocal"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }
