package reliability_test

import (
	"os"
	"testing"

	"github.com/idemkit/idem/internal/ddblocal"
)

func TestMain(m *testing.M) {
	if os.Getenv(envCrashChild) != "" {
		os.Exit(crashChild())
	}
	os.Exit(ddblocal.Main(m))
}
