package httpsem

import (
	"context"
	"errors"
	"log/slog"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// The reasons a refusal's log line names ([LogRefusal]), as [RefusalReason] tells them
// from the guard's error. Those the sqs wrapper also has are spelt as its sqs.Reason
// values. The answer each gets is that of [Guard.Run].
const (
	// ReasonInProgress: the key is in flight elsewhere (409).
	ReasonInProgress = "in_progress"
	// ReasonPayloadMismatch: the key was used for another request (422).
	ReasonPayloadMismatch = "payload_mismatch"
	// ReasonLeaseLost: another request took the key over (409).
	ReasonLeaseLost = "lease_lost"
	// ReasonStore: the store failed; the handler did not run (503).
	ReasonStore = "store"
	// ReasonNotCommitted: the handler ran, and nothing of its outcome committed (503).
	ReasonNotCommitted = "not_committed"
	// ReasonOutcomeUnknown: the handler ran, and whether its outcome committed is unknown
	// (503).
	ReasonOutcomeUnknown = "outcome_unknown"
	// ReasonAttachedWriteFailed: an attached write's condition failed (409).
	ReasonAttachedWriteFailed = "attached_write_failed"
	// ReasonNotReplayable: the request completed, but its response cannot be replayed
	// (500).
	ReasonNotReplayable = "not_replayable"
	// ReasonFailedBefore: a remembered failure was replayed.
	ReasonFailedBefore = "failed_before"
	// ReasonAborted: the run ended before it answered (503).
	ReasonAborted = "aborted"
)

// RefusalReason names why err, the guard's answer to a request, refused or failed it: one
// of the Reason values, or "" for an error that is none of them (the handler's own, a
// cancelled context).
func RefusalReason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, idem.ErrInProgress):
		return ReasonInProgress
	case errors.Is(err, idem.ErrPayloadMismatch):
		return ReasonPayloadMismatch
	case errors.Is(err, idem.ErrLeaseLost):
		return ReasonLeaseLost
	case errors.Is(err, idem.ErrConditionFailed):
		return ReasonAttachedWriteFailed
	case errors.Is(err, idem.ErrResultNotStored), errors.Is(err, idem.ErrIncompatibleRecord):
		return ReasonNotReplayable
	case isOp(err, idem.OpCommit): // before ErrStore, which it also satisfies
		return ReasonOutcomeUnknown
	case errors.Is(err, idemstore.ErrNotCommitted):
		return ReasonNotCommitted
	case errors.Is(err, idem.ErrStore):
		return ReasonStore
	case errors.Is(err, idem.ErrFailed):
		return ReasonFailedBefore
	}
	return ""
}

// LogRefusal writes, at INFO through g's logger, the one line of a request r that the
// guard refused or failed for reason (with err, its error): "<pkg>: request refused",
// with the stored key (never the raw key), the reason, the HTTP status answered when
// status is not 0, and the Retry-After of a key in flight. On-call finds the request's
// record from it (idemctl show --stored-key). Nothing is written for an empty reason.
func LogRefusal(ctx context.Context, pkg string, g *idem.Guard, r idem.Request, reason string, status int, err error) {
	l := g.Logger()
	if reason == "" || !l.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 4)
	if key, kerr := g.StoredKey(r); kerr == nil {
		attrs = append(attrs, slog.String("stored_key", key))
	}
	attrs = append(attrs, slog.String("reason", reason))
	if status != 0 {
		attrs = append(attrs, slog.Int("status", status))
	}
	var ip *idem.InProgressError
	if errors.As(err, &ip) {
		attrs = append(attrs, slog.Duration("retry_after", ip.RetryAfter))
	}
	l.LogAttrs(ctx, slog.LevelInfo, pkg+": request refused", attrs...)
}

// refused logs the refusal of r with err, answered resp (see [LogRefusal]), and returns
// resp.
func (s *Guard) refused(ctx context.Context, r idem.Request, reason string, err error, resp Response) Response {
	LogRefusal(ctx, s.s.Package, s.g, r, reason, resp.StatusCode, err)
	return resp
}
