package rabbitconsumer_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/proctest"
	"github.com/idemkit/idem/internal/rabbitserver"
	"github.com/idemkit/idem/pgstore/pgstoretest"
)

// envRequire, when set, turns a broker that cannot be started into a failure.
const envRequire = "IDEM_REQUIRE_RABBITMQ"

// envChild marks a child process of a test that expects it may crash
// (review28_internal_test.go): it starts no server, which the crash would leave running.
const envChild = "IDEM_REVIEW28_CHILD"

// The test binary's broker, started once by TestMain (starting one takes seconds), or why
// none could be had.
var (
	broker    *rabbitserver.Server
	brokerErr error
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv(envChild) != "" {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	broker, brokerErr = rabbitserver.Start(ctx)
	cancel()
	if brokerErr != nil {
		if os.Getenv(envRequire) != "" {
			fmt.Fprintf(os.Stderr, "rabbitconsumer: %v (%s is set: the tests may not skip)\n", brokerErr, envRequire)
			return 1
		}
		proctest.LeaveOutExamples()
		fmt.Fprintf(os.Stderr, "rabbitconsumer: no RabbitMQ, so the examples are left out: %v\n", brokerErr)
	} else {
		defer func() {
			if err := broker.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "rabbitconsumer: stop the broker: %v\n", err)
			}
		}()
	}
	return pgstoretest.Main(m)
}

// brokerURL returns the AMQP URL of the test binary's broker, or skips tb (fails it with
// IDEM_REQUIRE_RABBITMQ set) when there is none.
func brokerURL(tb testing.TB) string {
	tb.Helper()
	if brokerErr != nil {
		proctest.Unavailable(tb, envRequire, brokerErr)
	}
	return broker.URL()
}
