package esm

import (
	"fmt"
	"time"
)

// Defaults of the options.
const (
	// DefaultBatchSize is Lambda's default BatchSize for Kinesis and DynamoDB Streams.
	DefaultBatchSize = 100
	// MaxBatchSize is Lambda's largest BatchSize for a stream.
	MaxBatchSize = 10000
	// DefaultTimeout is the function timeout the poller gives each invocation. Lambda's
	// default is 3 seconds; a test machine under load needs more, and a test that wants a
	// timeout sets one ([WithTimeout]) or injects it ([Crash]).
	DefaultTimeout = 30 * time.Second
	// DefaultFunctionARN is the function ARN the handler finds in its lambdacontext.
	DefaultFunctionARN = "arn:aws:lambda:us-east-1:000000000000:function:esm-test"
)

// Option configures a [Poller]; the names follow the event source mapping's settings.
type Option func(*config)

type config struct {
	batchSize   int
	report      bool
	bisect      bool
	maxRetries  int
	timeout     time.Duration
	fault       func(Batch) Fault
	functionARN string
	retryDelay  time.Duration
}

func newConfig(opts []Option) (config, error) {
	c := config{
		batchSize:   DefaultBatchSize,
		maxRetries:  -1,
		timeout:     DefaultTimeout,
		functionARN: DefaultFunctionARN,
	}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case c.batchSize < 1 || c.batchSize > MaxBatchSize:
		return c, fmt.Errorf("esm: WithBatchSize: %d is outside 1 to %d", c.batchSize, MaxBatchSize)
	case c.maxRetries < -1:
		return c, fmt.Errorf("esm: WithMaximumRetryAttempts: %d is below -1", c.maxRetries)
	case c.timeout <= 0:
		return c, fmt.Errorf("esm: WithTimeout: %v is not positive", c.timeout)
	case c.retryDelay < 0:
		return c, fmt.Errorf("esm: WithRetryDelay: %v is negative", c.retryDelay)
	}
	return c, nil
}

// WithBatchSize sets BatchSize: the most records one invocation carries. The default is
// [DefaultBatchSize]; 1 to [MaxBatchSize].
func WithBatchSize(n int) Option { return func(c *config) { c.batchSize = n } }

// WithReportBatchItemFailures turns on ReportBatchItemFailures (FunctionResponseTypes):
// the poller reads the handler's partial batch response. Off by default, when the
// response is ignored and only a function error fails a batch.
func WithReportBatchItemFailures() Option { return func(c *config) { c.report = true } }

// WithBisectBatchOnFunctionError turns on BisectBatchOnFunctionError: a failed batch is
// split in two (see the package documentation for when). Off by default.
func WithBisectBatchOnFunctionError() Option { return func(c *config) { c.bisect = true } }

// WithMaximumRetryAttempts sets MaximumRetryAttempts: how many times a failed batch is
// retried before its records are discarded to the on-failure destination
// ([Report.Discarded]). The default, -1, retries until the test's context ends (Lambda:
// until the record expires); 0 to 10000 otherwise.
func WithMaximumRetryAttempts(n int) Option { return func(c *config) { c.maxRetries = n } }

// WithTimeout sets the function timeout: the deadline of each invocation's context, past
// which the invocation counts as a function error whatever the handler returns. Go cannot
// stop a goroutine as Lambda stops a sandbox, so the poller waits for the handler to
// return before the next batch of the shard: a handler that ignores its context delays
// the retry but never overlaps it. The default is [DefaultTimeout].
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithFault calls f before each invocation; the [Fault] it returns is injected into that
// invocation. Shards call f from their own goroutines, so concurrently when the stream has
// several. By default no fault is injected.
func WithFault(f func(Batch) Fault) Option { return func(c *config) { c.fault = f } }

// WithFunctionARN sets the function ARN the handler finds in its lambdacontext. The
// default is [DefaultFunctionARN].
func WithFunctionARN(arn string) Option { return func(c *config) { c.functionARN = arn } }

// WithRetryDelay makes the poller wait d after a failed invocation before it invokes the
// shard again, so that a test whose handler waits for something (a lease to end, say)
// does not spin through retries. It is not an event source mapping setting: Lambda's own
// pacing of retries is not documented. The default, 0, retries at once; d must not be
// negative.
func WithRetryDelay(d time.Duration) Option { return func(c *config) { c.retryDelay = d } }
