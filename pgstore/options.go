package pgstore

import (
	"fmt"

	"github.com/idemkit/idem"
)

// Option configures a [Store].
type Option func(*config) error

type config struct {
	lockingClaims bool // see WithLockingClaims
}

func newConfig(opts []Option) (config, error) {
	var c config
	for _, o := range opts {
		if o == nil {
			return config{}, fmt.Errorf("%w: pgstore: New: option must not be nil", idem.ErrInvalidOption)
		}
		if err := o(&c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}

// WithLockingClaims makes every claim lock the record it meets, as in the modes that parse
// and plan every statement, instead of answering a replay or a refusal from the
// statement's snapshot. A refusal then takes a transaction ID, and the claim's commit
// flushes the WAL (and waits for synchronous standbys) as the session's synchronous_commit
// says, so a replay is answered only once every commit before it, the replayed
// completion's included, is that durable. Give it to every store that reads the table when
// another writer of the table commits less durably than the store's own sessions: a
// synchronous_commit off that the store's sessions do not share. Without it the store
// sees only its own sessions' settings (see the package documentation's Durability).
func WithLockingClaims() Option {
	return func(c *config) error {
		c.lockingClaims = true
		return nil
	}
}
