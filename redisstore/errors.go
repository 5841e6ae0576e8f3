package redisstore

import "errors"

// ErrAttachUnsupported is wrapped by the error idem.Attach returns for any write attached
// with this store ([Store.CheckAttached]), and by the error of a completion that still
// carries one (a guard that bypassed Attach's check). Redis has no transaction that could
// commit a business write elsewhere (a database, another cluster slot) atomically with the
// record, so the store refuses them rather than pretend: nothing is committed, and the key
// is released, so the work runs again on a retry. Guard handlers that attach writes with a
// store that supports them (the DynamoDB store), or make their effects idempotent on their
// own.
var ErrAttachUnsupported = errors.New("redisstore: attached writes are not supported")
