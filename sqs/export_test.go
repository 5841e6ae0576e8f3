package sqs

// WithBatchRedeliveries makes batch claims cover batches whose every message is a
// redelivery, which otherwise take the per-message path: the suite runs its redelivery
// scenarios on the batch path with it.
func WithBatchRedeliveries() Option {
	return func(c *config) error {
		c.batchRedeliveries = true
		return nil
	}
}
