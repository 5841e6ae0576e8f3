package idem

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxCheckpointLen is the longest checkpoint [Checkpoint] takes, in bytes: 1 KiB. It also
// bounds the stored form of a [CheckpointValue], step and encoded value together. A
// checkpoint is a progress marker ("payment_charged") and the little a later step needs
// (a reservation id), not state. It lives in the record for as long as the record does,
// every claim that takes the key over carries it, and on DynamoDB a replay's claim is
// billed one write unit per KB of the record it meets.
const MaxCheckpointLen = 1024

// Checkpoint records a progress marker (for example "payment_charged") on the key whose
// handler ctx belongs to, conditional on the lease token: one store round trip. A
// checkpoint replaces the last one, a [CheckpointValue]'s included. The next owner reads it
// with [LastCheckpoint] and can resume:
//
//   - If the handler crashes, the next owner reads it after taking over the expired lease.
//   - If the handler returns an error or panics after a checkpoint, the key is released
//     with the checkpoint kept (the record stays, its lease ended). So the retry runs at
//     once and resumes from it too.
//
// A checkpoint lasts until the key completes or expires, through any number of takeovers.
// Each new owner's claim carries it into its own record (one more claim round trip). A
// request with another fingerprint gets [ErrPayloadMismatch] rather than take the key over.
//
// A checkpoint is durable at once; writes attached with [Attach] land only when the
// handler completes, and a crash or a lost lease loses them. So a checkpoint marks effects
// outside the completion (a card charged at a payment provider, an email sent), never an
// attached write: after a crash, the next owner would find such a checkpoint but not the
// write, and skip the write for good. Every owner attaches every write its request needs,
// whatever the checkpoint says (see ExampleAttach_withCheckpoint).
//
// A checkpoint is kept byte for byte on every store. Checkpoint refuses, with an error
// wrapping [ErrInvalidCheckpoint], and writes nothing for a checkpoint that:
//
//   - is not valid UTF-8, or holds a NUL byte;
//   - is empty, or longer than [MaxCheckpointLen] bytes;
//   - begins with "idem:cp1 ", the form a [CheckpointValue] is stored in.
//
// The checkpoints of one lease are numbered and sent one at a time (concurrent calls wait
// for each other). A store never lets a checkpoint write replace one numbered after it. So
// a write whose first attempt reaches the store late, after a client's resend succeeded
// and a later checkpoint was recorded, changes nothing: the next owner resumes from the
// last checkpoint recorded, never an earlier one.
//
// Checkpoint returns [ErrLeaseLost] if the lease was taken over, an error wrapping
// [ErrStore] if the store failed, and an error outside a guarded handler.
func Checkpoint(ctx context.Context, checkpoint string) error {
	l := leaseFrom(ctx)
	if l == nil {
		return ErrNoLease
	}
	if fault := checkpointFault(checkpoint); fault != "" {
		return fmt.Errorf("%w: %s", ErrInvalidCheckpoint, fault)
	}
	return l.recordCheckpoint(ctx, checkpoint)
}

// CheckpointValue records a checkpoint that carries a value: the step reached (for
// example "reserved") and what later steps need from it (the reservation's id). It is a
// [Checkpoint] in every other way: conditional on the lease token, one store round trip,
// durable at once, kept through takeovers and a failed handler's release, and it replaces
// the last checkpoint. So the value is the state to resume from, not a log entry: carry
// forward what later steps still need. The next owner reads it with [LastCheckpointValue].
//
// The value is encoded with the guard's codec ([WithCodec], JSON by default). It is
// stored as text every store keeps exactly, whatever bytes the codec produced: the codec's
// output as it is when it is valid UTF-8 without NUL bytes, else its base64. It returns an
// error wrapping [ErrInvalidCheckpoint] (and the codec's error, if any), and writes
// nothing, for:
//
//   - a step that is not a valid [Checkpoint];
//   - a step and encoded value that together do not fit [MaxCheckpointLen] bytes;
//   - a value the codec cannot encode.
//
// Otherwise it returns what [Checkpoint] returns.
//
// [LastCheckpoint] reads the step alone. An idem before this function reads the stored
// form, "idem:cp1 " and the rest, as a plain checkpoint.
func CheckpointValue(ctx context.Context, step string, v any) error {
	l := leaseFrom(ctx)
	if l == nil {
		return ErrNoLease
	}
	if fault := checkpointFault(step); fault != "" {
		return fmt.Errorf("%w: step: %s", ErrInvalidCheckpoint, fault)
	}
	stored, err := l.g.cfg.encodeCheckpoint(step, v)
	if err != nil {
		return err
	}
	return l.recordCheckpoint(ctx, stored)
}

// recordCheckpoint writes checkpoint, the stored form, as the lease's next one.
func (l *lease) recordCheckpoint(ctx context.Context, checkpoint string) error {
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

// checkpointFault says why some store would not keep checkpoint exactly, or returns "".
// DynamoDB and PostgreSQL take only valid UTF-8 (the SDK turns an invalid byte into
// U+FFFD, so the next owner would resume from a checkpoint nobody wrote; PostgreSQL fails
// every run), and PostgreSQL's text no NUL. An empty checkpoint is no checkpoint to some
// stores and an empty value to others. The length bound is the same on every store. A
// checkpoint in the stored form of a [CheckpointValue] would read back as one.
func checkpointFault(checkpoint string) string {
	switch {
	case checkpoint == "":
		return "empty"
	case len(checkpoint) > MaxCheckpointLen:
		return fmt.Sprintf("%d bytes, more than %d", len(checkpoint), MaxCheckpointLen)
	case !utf8.ValidString(checkpoint):
		return "not valid UTF-8"
	case strings.IndexByte(checkpoint, 0) >= 0:
		return "holds a NUL byte"
	case strings.HasPrefix(checkpoint, valuePrefix):
		return fmt.Sprintf("begins with %q, the stored form of a CheckpointValue", valuePrefix)
	}
	return ""
}

// LastCheckpoint returns the last checkpoint recorded for the key whose handler ctx belongs
// to: this owner's latest, or, right after taking over a lease that ended (a crash, or a
// handler that failed after a checkpoint), the previous owner's. For a checkpoint recorded
// with [CheckpointValue] it returns the step. It returns "" when there is none or outside
// a guarded handler.
func LastCheckpoint(ctx context.Context) string {
	l := leaseFrom(ctx)
	if l == nil {
		return ""
	}
	cp, _ := l.lastCheckpoint()
	if f, err := parseCheckpoint(cp); err == nil {
		return f.step
	}
	return cp
}

// LastCheckpointValue returns the last checkpoint recorded for the key whose handler ctx
// belongs to, as [LastCheckpoint] finds it, with its value decoded into a T:
//   - a [CheckpointValue]: its step, its value and ok true;
//   - a [Checkpoint] (also one an idem before CheckpointValue wrote): the checkpoint as
//     step, the zero T and ok false;
//   - none, or outside a guarded handler: "", the zero T and ok false.
//
// A value that does not decode into a T with the guard's codec (another type, another
// codec, a damaged record) is an error wrapping [ErrIncompatibleRecord] and the codec's
// error, with the step (or the whole checkpoint, when it has none), the zero T and ok false: the
// handler knows how far it got but not with what, and should not go on as if it had
// never started.
func LastCheckpointValue[T any](ctx context.Context) (step string, v T, ok bool, err error) {
	l := leaseFrom(ctx)
	if l == nil {
		return "", v, false, nil
	}
	cp, _ := l.lastCheckpoint()
	if !strings.HasPrefix(cp, valuePrefix) {
		return cp, v, false, nil
	}
	f, err := parseCheckpoint(cp)
	if err != nil {
		return cp, v, false, fmt.Errorf("idem: LastCheckpointValue: %w: %w", ErrIncompatibleRecord, err)
	}
	if err := l.g.cfg.decodeCheckpoint(f, &v); err != nil {
		var zero T // never what a failed decoding left half-written
		return f.step, zero, false, fmt.Errorf("idem: LastCheckpointValue: step %q: %w: %w", f.step, ErrIncompatibleRecord, err)
	}
	return f.step, v, true, nil
}
