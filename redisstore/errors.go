package redisstore

import "errors"

// ErrAttachUnsupported is wrapped by the error of a completion that carries attached
// writes ([idem.Attach]). Redis has no transaction that could commit a business write
// elsewhere (a database, another cluster slot) atomically with the record, so the store
// refuses them rather than pretend: the completion commits nothing, the error also wraps
// [idemstore.ErrNotCommitted] and [idem.ErrStore], and the guard releases the key, so the work
// runs again on a retry. Guard handlers that attach writes with a store that supports them
// (the DynamoDB store), or make their effects idempotent on their own.
var ErrAttachUnsupported = errors.New("redisstore: attached writes are not supported")
