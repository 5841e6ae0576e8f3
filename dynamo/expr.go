package dynamo

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
	// token, as other writers may leave, is no such tombstone), and whose checkpoint the
	// claim carries (claimCarrying, with :cp) or which has none (claimFresh). A record's own
	// end counts as ended, as in idemstore.Record: "<=" between a stored end rounded up
	// (encodeEnd) and now rounded down (encodeEpoch) holds exactly when now is at or past
	// the stored end, never before the record's own end.
	claimCondition = "attribute_not_exists(" + phID + ") OR " + phExpiration + " <= :now OR (" +
		phStatus + " = :inprogress AND " + phLease + " <= :now_ms AND " +
		"(attribute_not_exists(" + phToken + ") OR " + phToken + " <> :released) AND "
	// claimFresh's record has no checkpoint. An empty string counts as none: the release
	// before checkpoint numbers wrote one for idem.Checkpoint(ctx, ""), and such a record
	// decodes as having no checkpoint.
	claimFresh    = claimCondition + "(attribute_not_exists(" + phCheckpoint + ") OR " + phCheckpoint + " = :empty))"
	claimCarrying = claimCondition + phCheckpoint + " = :cp)"
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
