package redisstore

import (
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// DefaultKeyPrefix is the prefix of every record's Redis key (see [WithKeyPrefix]).
const DefaultKeyPrefix = "idem:"

// DefaultMaxRecordSize is the largest record the store writes, in bytes (see
// [WithMaxRecordSize]): 16 MiB. Redis itself takes values up to 512 MB, but a value is
// copied on the server's one command thread, so multi-megabyte results delay every other
// client of the server while they are written and read.
const DefaultMaxRecordSize = 16 << 20

// DefaultExpiryGrace is how long after a record's Expires the server deletes it (see
// [WithExpiryGrace]): 5 minutes, as pgstore.ExpiryGrace.
const DefaultExpiryGrace = 5 * time.Minute

// Option configures a [Store].
type Option func(*config) error

type config struct {
	prefix        string
	maxRecordSize int
	expiryGrace   time.Duration
}

func newConfig(opts []Option) (config, error) {
	c := config{prefix: DefaultKeyPrefix, maxRecordSize: DefaultMaxRecordSize, expiryGrace: DefaultExpiryGrace}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}

func optErr(option, msg string) error {
	return fmt.Errorf("%w: redisstore: %s: %s", idem.ErrInvalidOption, option, msg)
}

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

// WithExpiryGrace sets how long after a record's Expires the Redis server deletes it
// (PEXPIREAT at Expires plus d): the skew of the server's clock ahead of the callers' that
// the store tolerates. Records count as absent from their Expires on, by the caller's clock,
// whether or not the server has deleted them, so a later deletion changes nothing but
// memory held a little longer. An earlier one does: the server deletes on its own clock, and
// with a clock ahead of the callers' by more than d it deletes a record before its Expires
// by theirs; a record whose lease a heartbeat extended up to its Expires then vanishes while
// its handler runs, and a second claim wins, and a completed result is forgotten before the
// end of its idempotency window. Default [DefaultExpiryGrace]; must not be negative; 0
// deletes at Expires, which is safe only on a server whose clock never runs ahead.
func WithExpiryGrace(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return optErr("WithExpiryGrace", "must not be negative")
		}
		c.expiryGrace = d
		return nil
	}
}
