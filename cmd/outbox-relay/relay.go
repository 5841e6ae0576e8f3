package main

import (
	"log/slog"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/outbox/ddbrelay"
	"github.com/idemkit/idem/outbox/sqspub"
)

// LagMetric is the EMF metric of each batch's lag: the age of its oldest record, in
// milliseconds (whole seconds: the stream's ApproximateCreationDateTime).
const LagMetric = "OutboxLag"

// recordExpiry is how long the relay remembers an event it published: longer than a
// stream keeps a record (24 hours), so every delivery of it finds its key.
const recordExpiry = 2 * 24 * time.Hour

// newRelay wires the relay: its records on idemTable under the name "outbox-relay", and
// an SQS publisher; batches are logged and measured through logger and metrics.
func newRelay(ddb dynamo.API, idemTable string, client sqspub.API, logger *slog.Logger, metrics *emf.Recorder) (*ddbrelay.Relay, error) {
	store, err := dynamo.New(ddb, idemTable)
	if err != nil {
		return nil, err
	}
	guard, err := idem.New(store, "outbox-relay", idem.WithExpiry(recordExpiry), idem.WithLogger(logger), idem.WithHooks(metrics.Hooks()))
	if err != nil {
		return nil, err
	}
	onLag := func(d time.Duration) { _ = metrics.Observe(LagMetric, emf.UnitMilliseconds, float64(d.Milliseconds())) }
	return ddbrelay.New(guard, sqspub.New(client), ddbrelay.WithHooks(ddbrelay.Hooks{OnLag: onLag}))
}
