package idem

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxCheckpointLen is the longest checkpoint [Checkpoint] takes, in bytes: 1 KiB. A
// checkpoint is a progress marker ("payment_charged"), not state; it lives in the record
// for as long as the record does, every claim that takes the key over carries it, and on
// DynamoDB a replay's claim is billed one write unit per KB of the record it meets.
const MaxCheckpointLen = 1024

// Checkpoint records a progress marker (for example "payment_charged") on the key whose
// handler ctx belongs to, conditional on the lease token: one store round trip. If the
// handler crashes, the next owner reads the marker with [LastCheckpoint] after taking over
// the expired lease and can resume. If the handler returns an error or panics after a
// checkpoint, the key is released with the checkpoint kept (the record stays, its lease
// ended), so the retry runs at once and resumes from it too. A checkpoint lasts until the
// key completes or expires, through any number of takeovers: each new owner's claim carries
// it into its own record (one more claim round trip), and a request with another
// fingerprint gets [ErrPayloadMismatch] rather than take the key over.
//
// A checkpoint is durable at once; writes attached with [Attach] land only when the
// handler completes, and a crash or a lost lease loses them. So a checkpoint marks effects
// outside the completion (a card charged at a payment provider, an email sent), never an
// attached write: after a crash, the next owner would find such a checkpoint but not the
// write, and skip the write for good. Every owner attaches every write its request needs,
// whatever the checkpoint says (see ExampleAttach_withCheckpoint).
//
// A checkpoint is kept byte for byte on every store. It must be valid UTF-8 without NUL
// bytes, not empty, and at most [MaxCheckpointLen] bytes long; Checkpoint refuses any
// other with an error wrapping [ErrInvalidCheckpoint], and writes nothing.
//
// The checkpoints of one lease are numbered and sent one at a time (concurrent calls wait
// for each other), and a store never lets a checkpoint write replace one numbered after
// it: a write whose first attempt reaches the store late, after a client's resend
// succeeded and a later checkpoint was recorded, changes nothing, so the next owner
// resumes from the last checkpoint recorded, never an earlier one. Checkpoint returns
// [ErrLeaseLost] if the lease was taken over, an error wrapping [ErrStore] if the store
// failed, and an error outside a guarded handler.
func Checkpoint(ctx context.Context, checkpoint string) error {
	l := leaseFrom(ctx)
	if l == nil {
		return ErrNoLease
	}
	if err := checkCheckpoint(checkpoint); err != nil {
		return err
	}
	// Each write gets the next number, whether or not an earlier one failed: a write whose
	// outcome is unknown may still land, and must not land on a later one.
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	l.mu.Lock()
	l.cpSeq++
	seq := l.cpSeq
	l.mu.Unlock()
	start := l.g.now()
	err := l.g.store.SetCheckpoint(ctx, l.key, l.token, checkpoint, seq)
	if err != nil {
		err = storeErr("checkpoint", err)
		l.g.storeFailed(ctx, l.key, "checkpoint", start, err)
		return err
	}
	l.mu.Lock()
	l.checkpoint = checkpoint
	l.mu.Unlock()
	return nil
}

// checkCheckpoint refuses a checkpoint that some store would not keep exactly: DynamoDB
// and PostgreSQL take only valid UTF-8 (the SDK turns an invalid byte into U+FFFD, so the
// next owner would resume from a checkpoint nobody wrote; PostgreSQL fails every run), and
// PostgreSQL's text no NUL. An empty checkpoint is no checkpoint to some stores and an
// empty value to others. The length bound is the same on every store.
func checkCheckpoint(checkpoint string) error {
	switch {
	case checkpoint == "":
		return fmt.Errorf("%w: empty", ErrInvalidCheckpoint)
	case len(checkpoint) > MaxCheckpointLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidCheckpoint, len(checkpoint), MaxCheckpointLen)
	case !utf8.ValidString(checkpoint):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidCheckpoint)
	case strings.IndexByte(checkpoint, 0) >= 0:
		return fmt.Errorf("%w: holds a NUL byte", ErrInvalidCheckpoint)
	}
	return nil
}

// LastCheckpoint returns the last checkpoint recorded for the key whose handler ctx belongs
// to: this owner's latest, or, right after taking over a lease that ended (a crash, or a
// handler that failed after a checkpoint), the previous owner's. It returns "" when there
// is none or outside a guarded handler.
func LastCheckpoint(ctx context.Context) string {
	l := leaseFrom(ctx)
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkpoint
}
