// Package pgoutbox relays the events that pgstore commits into its outbox table (see
// package outbox, and pgstore.OutboxSchema) to a broker: at least once, in order per
// ordering key, with any number of relays running at once.
//
// A [Relay] wakes on the NOTIFY that each committed event sends (LISTEN on
// pgstore.OutboxChannel), and polls as a fallback every [WithPollInterval]. Each pass
// takes, in one transaction, the ordering keys of a batch of unpublished rows that are
// each the oldest of its key: oldest first, FOR UPDATE SKIP LOCKED, and only keys no other
// relay holds (a transaction-scoped advisory lock per ordering key,
// pgstore.OutboxLockKey); then, holding those keys, it reads their oldest unpublished rows
// again, a share of the batch per key, so each key's rows start at its oldest and have no
// gaps. It hands them to an
// [outbox.Publisher] at most one message per ordering key per call, a key's next message
// only after its previous one was published, marks what was published (published_at) in
// the same transaction, and commits, which releases the keys.
//
// At least once: a relay that crashes between publishing and committing leaves its rows
// unpublished, and the next pass (its own or another relay's) publishes them again, with
// the same ids; so does a publish whose answer was lost (the publisher reports it failed).
// Consumers deduplicate on the id ([outbox.IDAttribute]: package sqs does by default).
//
// In order per ordering key: producers take an advisory lock per ordering key before their
// event's INSERT and hold it to their commit, so one key's events are numbered (seq) in
// commit order;
// a relay publishes a key's events in that order and stops at the first failure, which
// blocks the key until it is published (head-of-line: a message the broker always
// refuses holds its key back, and only its key: a pass takes no more of a key than its
// share, so other keys go on; attempts and last_error on its row say so).
//
// Published rows stay until pgstore.OutboxPurgeStatement removes them. [Relay.Lag] is the
// age of the oldest unpublished event: the outbox's lag, to alarm on ([Hooks.OnLag]
// reports it as the relay runs). [ReadBacklog] adds the count of unpublished events and
// the oldest one's failed attempts and last error, for an operator (idemctl outbox lag).
package pgoutbox
