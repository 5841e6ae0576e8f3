package dynamo

import (
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/idemstore"
)

// Expression attribute name placeholders. They are fixed, whatever the configured attribute
// names, because a placeholder may hold only letters, digits and underscores while an
// attribute name may hold anything.
const (
	phID         = "#id"
	phStatus     = "#status"
	phExpiration = "#exp"
	phLease      = "#lease"
	phValidation = "#fp"
	phData       = "#data"
	phDataRef    = "#dref"
	phToken      = "#token"
	phCheckpoint = "#cp"
	phCpSeq      = "#cpseq"
	phVersion    = "#v"
	phEncoding   = "#enc"
)

// names returns the expression attribute names for the placeholders used by one request;
// DynamoDB refuses names that its expressions do not use.
func (a *Attributes) names(placeholders ...string) map[string]string {
	m := make(map[string]string, len(placeholders))
	for _, ph := range placeholders {
		m[ph] = a.attr(ph)
	}
	return m
}

// attr returns the attribute name behind a placeholder.
func (a *Attributes) attr(placeholder string) string {
	switch placeholder {
	case phID:
		return a.ID
	case phStatus:
		return a.Status
	case phExpiration:
		return a.Expiration
	case phLease:
		return a.InProgressExpiration
	case phValidation:
		return a.Validation
	case phData:
		return a.Data
	case phDataRef:
		return a.DataRef
	case phToken:
		return a.LeaseToken
	case phCheckpoint:
		return a.Checkpoint
	case phCpSeq:
		return a.CheckpointSeq
	case phVersion:
		return a.Version
	case phEncoding:
		return a.Encoding
	}
	panic("dynamo: unknown placeholder " + placeholder) // our own constants only
}

// Condition expressions.
const (
	// claimCondition holds when the claim may replace what holds the key: nothing, an
	// expired record (TTL deletion lags by up to days, so expired items are still found),
	// or an in-progress record whose lease has ended, which is not the tombstone of the
	// claim's own token's release (:released, idemstore.ReleasedToken of the claim's token:
	// a late attempt of a claim whose owner released the key since; a record without a
	// token, as other writers may leave, is no such tombstone), and which has no checkpoint
	// (claimFresh) or the checkpoint the claim carries (see claimExpr). A
	// record's own end counts as ended, as in idemstore.Record: "<=" between a stored end
	// rounded up (encodeEnd) and now rounded down (encodeEpoch) holds exactly when now is
	// at or past the stored end, never before the record's own end.
	claimCondition = "attribute_not_exists(" + phID + ") OR " + phExpiration + " <= :now OR (" +
		phStatus + " = :inprogress AND " + phLease + " <= :now_ms AND " +
		"(attribute_not_exists(" + phToken + ") OR " + phToken + " <> :released) AND "
	// noCheckpoint holds for a record without a checkpoint. An empty string counts as
	// none: the release before checkpoint numbers wrote one for idem.Checkpoint(ctx, ""),
	// and such a record decodes as having no checkpoint.
	noCheckpoint = "(attribute_not_exists(" + phCheckpoint + ") OR " + phCheckpoint + " = :empty)"
	claimFresh   = claimCondition + noCheckpoint + ")"
	// ownedCondition holds while the caller's token owns the record (fencing).
	ownedCondition = phToken + " = :token"
	// ownedInProgressCondition also requires the lease to be running: a completed record
	// needs no lease extension or checkpoint, and is never completed again or released.
	ownedInProgressCondition = ownedCondition + " AND " + phStatus + " = :inprogress"
	// extendCondition moves the lease end only later (or sets a missing one): a late
	// extension never lowers it.
	extendCondition = ownedInProgressCondition + " AND (attribute_not_exists(" + phLease + ") OR " + phLease + " <= :end)"
	// checkpointCondition writes checkpoint number :seq only over a lower number (or none),
	// or over itself (a resend): a late write never replaces a later checkpoint.
	checkpointCondition = ownedInProgressCondition + " AND (attribute_not_exists(" + phCpSeq + ") OR " +
		phCpSeq + " < :seq OR (" + phCpSeq + " = :seq AND " + phCheckpoint + " = :cp))"
)

// claimExpr returns the condition of a claim of rec ([Store.Claim]), the placeholders it
// names and the values it uses besides :now, :now_ms, :inprogress and :released. A claim
// that carries a checkpoint takes over a lease-ended record only if it holds that
// checkpoint with its number (an absent number counts as 0), for the same request: an
// equal fingerprint, an absent or empty one counting as none. The number refuses a late
// claim carrying an equal value recorded earlier (A, B, A); the fingerprint refuses to
// carry a checkpoint onto another request's record with an equal value.
func claimExpr(rec *idemstore.Record) (cond string, names []string, values map[string]types.AttributeValue) {
	names = []string{phID, phExpiration, phStatus, phLease, phToken, phCheckpoint}
	values = map[string]types.AttributeValue{":empty": &types.AttributeValueMemberS{Value: ""}}
	if rec.Checkpoint == "" {
		return claimFresh, names, values
	}
	values[":cp"] = &types.AttributeValueMemberS{Value: rec.Checkpoint}
	values[":seq"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(rec.CheckpointSeq, 10)}
	seq := phCpSeq + " = :seq"
	if rec.CheckpointSeq == 0 {
		seq = "(attribute_not_exists(" + phCpSeq + ") OR " + seq + ")"
	}
	fp := "(attribute_not_exists(" + phValidation + ") OR " + phValidation + " = :empty)"
	if rec.Fingerprint != "" {
		fp = phValidation + " = :fp"
		values[":fp"] = &types.AttributeValueMemberS{Value: rec.Fingerprint}
		delete(values, ":empty")
	}
	cond = claimCondition + phCheckpoint + " = :cp AND " + seq + " AND " + fp + ")"
	return cond, append(names, phCpSeq, phValidation), values
}
