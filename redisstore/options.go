package redisstore

import "fmt"

// DefaultKeyPrefix is the prefix of every record's Redis key (see [WithKeyPrefix]).
const DefaultKeyPrefix = "idem:"

// DefaultMaxRecordSize is the largest record the store writes, in bytes (see
// [WithMaxRecordSize]): 16 MiB. Redis itself takes values up to 512 MB, but a value is
// copied on the server's one command thread, so multi-megabyte results delay every other
// client of the server while they are written and read.
const DefaultMaxRecordSize = 16 << 20

// Option configures a [Store].
type Option func(*config) error

type config struct {
	prefix        string
	maxRecordSize int
}

func newConfig(opts []Option) (config, error) {
	c := config{prefix: DefaultKeyPrefix, maxRecordSize: DefaultMaxRecordSize}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}

func optErr(option, msg string) error { return fmt.Errorf("redisstore: %s: %s", option, msg) }

// WithKeyPrefix sets the prefix of every record's Redis key, so that idem's keys can share
// a database with others and be found with SCAN MATCH prefix*. Default [DefaultKeyPrefix];
// may be empty. Keep it free of braces: a hash tag in it would put every record in one
// cluster slot.
func WithKeyPrefix(prefix string) Option {
	return func(c *config) error {
		c.prefix = prefix
		return nil
	}
}

// WithMaxRecordSize sets the largest record the store writes, in bytes: its key and every
// field name and value, the result included. A larger one is refused before it is sent,
// with [idemstore.ErrTooLarge], and the guard then records the completion without the result
// (replays get [idem.ErrResultNotStored]). Default [DefaultMaxRecordSize]; must be
// positive. The guard's own limit, idem.WithMaxResultSize, defaults to DynamoDB's 390 KiB:
// raise it too to replay larger results.
func WithMaxRecordSize(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return optErr("WithMaxRecordSize", "must be positive")
		}
		c.maxRecordSize = n
		return nil
	}
}
