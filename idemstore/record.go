package idemstore

import (
	"strings"
	"time"
)

// Status is the state of an idempotency record, stored as a string attribute.
type Status string

// The statuses a record can have. The wire values are those of the Powertools for AWS Lambda
// idempotency utilities, so a table can be shared with functions written in other languages.
const (
	// StatusInProgress marks a key whose handler is running under a lease.
	StatusInProgress Status = "INPROGRESS"
	// StatusCompleted marks a key whose handler succeeded; its result is replayed.
	StatusCompleted Status = "COMPLETED"
	// StatusFailed marks a key whose handler failed with an error that
	// idem.WithRememberFailures called permanent; the error is replayed.
	StatusFailed Status = "FAILED"
)

// SchemaVersion is the record schema version this package writes. A record with a higher
// version is refused with [ErrIncompatibleRecord]. A record with no version (0) is read as
// version 1: records written by the Powertools utilities look so.
const SchemaVersion = 1

// Encodings of [Record.Data].
const (
	// EncodingNone means the record carries no result body: the result was too large to store,
	// or could not be encoded. Replaying it yields idem.ErrResultNotStored.
	EncodingNone = "none"
	// EncodingError means Data holds the message of a remembered failure.
	EncodingError = "error"
	// GzipSuffix is appended to a codec name when Data is gzip-compressed ("json+gzip").
	GzipSuffix = "+gzip"
)

// Record is one idempotency record: the state of one scoped key. Stores persist every
// field. The zero value of a field means the attribute is absent.
type Record struct {
	// Key is the stored key, "<scope>.<operation>#<sha256 hex>", never the caller's raw key.
	Key string
	// Status is the record's state.
	Status Status
	// Expires is when the record stops counting, whatever its status (the table's TTL
	// attribute). A record past Expires is treated as absent even if it still exists.
	Expires time.Time
	// LeaseExpires is when the current lease ends. An [StatusInProgress] record past it may
	// be taken over by a new claim.
	LeaseExpires time.Time
	// Fingerprint is the hex SHA-256 of the request fingerprint, or empty when the caller
	// gave none (payload validation off).
	Fingerprint string
	// Data is the encoded result (or failure message), possibly compressed.
	Data []byte
	// Encoding names how Data is encoded: a codec name such as "json", optionally with
	// [GzipSuffix], or [EncodingNone] or [EncodingError].
	Encoding string
	// LeaseToken is the random token of the lease owner. Completion, release, lease
	// extension and checkpoints are conditional on it.
	LeaseToken string
	// Checkpoint is the last progress marker the owner recorded with idem.Checkpoint, or
	// the stored form of one recorded with idem.CheckpointValue (text beginning
	// "idem:cp1 "). A store keeps it byte for byte; it is valid UTF-8 without NUL bytes.
	Checkpoint string
	// CheckpointSeq numbers Checkpoint among the checkpoints written to the record: each
	// checkpoint a lease writes has the next number, and a claim that carries a checkpoint
	// carries its number too. A checkpoint write with a lower number than the stored one
	// (a late first attempt of an earlier write) never replaces it (see
	// [Store.SetCheckpoint]). Zero, as in records of the Powertools utilities, when absent.
	CheckpointSeq int64
	// Version is the record schema version; see [SchemaVersion].
	Version int
}

// Expired reports whether the record no longer counts at now: it is past its Expires.
func (r *Record) Expired(now time.Time) bool {
	return !r.Expires.IsZero() && !now.Before(r.Expires)
}

// LeaseEnded reports whether an in-progress record's lease has ended at now. A record
// without a lease end (as other writers may leave) holds its key until it expires.
func (r *Record) LeaseEnded(now time.Time) bool {
	return r.Status == StatusInProgress && !r.LeaseExpires.IsZero() && !now.Before(r.LeaseExpires)
}

// ClaimableBy reports whether a claim of rec at now may replace the record r. It is the
// claim condition of [Store.Claim], for stores that evaluate it in Go. It holds when:
//   - r is nil or expired; or
//   - r's lease has ended, r is not the tombstone of rec's own token's release (a token of
//     [ReleasedToken](rec.LeaseToken)), and rec carries r's checkpoint: none on either
//     side, or the same checkpoint with the same number ([Record.CheckpointSeq]) for the
//     same request (an equal Fingerprint; both may be empty).
//
// The package doc says why each rule is there.
func (r *Record) ClaimableBy(rec *Record, now time.Time) bool {
	if r == nil || r.Expired(now) {
		return true
	}
	if !r.LeaseEnded(now) || r.LeaseToken == ReleasedToken(rec.LeaseToken) {
		return false
	}
	if r.Checkpoint == "" {
		return rec.Checkpoint == ""
	}
	return r.Checkpoint == rec.Checkpoint && r.CheckpointSeq == rec.CheckpointSeq && r.Fingerprint == rec.Fingerprint
}

// Released reports whether r is the tombstone a release left ([Store.Release]): its lease
// token is a [ReleasedToken]. Nobody holds a tombstone's key, although a caller whose clock
// runs behind the releaser's may still see its lease running.
func (r *Record) Released() bool {
	return r != nil && strings.HasPrefix(r.LeaseToken, ReleasedToken(""))
}

// Live reports whether the record holds its key at now: it is not nil, has not expired,
// and is not an in-progress record whose lease has ended.
func (r *Record) Live(now time.Time) bool {
	return r != nil && !r.Expired(now) && !r.LeaseEnded(now)
}
