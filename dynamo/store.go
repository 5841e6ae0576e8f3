package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// claimAttempts bounds the claim's puts when a conflicting record vanishes between the
// failed put and the read that looks for it, or a transaction holds a record the claim
// may replace.
const claimAttempts = 3

// Store is the DynamoDB [idemstore.Store]: one item per record, written with conditional
// writes so that every operation is atomic per key. A result too large for a record of
// 1 KB gets a second item of its own (see [Store.Complete]). It is safe for concurrent
// use. Its round trips:
//
//   - A claim is one PutItem, whether it wins or meets a live record.
//   - A completion is one UpdateItem, or one TransactWriteItems with attached writes.
//   - A release is one UpdateItem: the record stays, a tombstone (see [Store.Release]).
//   - Extend, checkpoint and get are one call each.
//   - A result over 1 KB (after compression) costs one call more to store (a PutItem of
//     its item) and one more to read (a GetItem, by a claim that meets the completed
//     record or by Get).
//
// Store is also an [idemstore.BatchStore]: see [Store.ClaimMany], [Store.CompleteMany]
// and [Store.ReleaseMany] for many records in a call.
type Store struct {
	client API
	table  string
	cfg    config
}

// New returns a Store that keeps records in table through client. It returns an error
// naming the option for bad options, and for a nil client or an empty table name.
func New(client API, table string, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: dynamo: New: client must not be nil", idem.ErrInvalidOption)
	}
	if table == "" {
		return nil, fmt.Errorf("%w: dynamo: New: table name must not be empty", idem.ErrInvalidOption)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Store{client: client, table: table, cfg: cfg}, nil
}

// Table returns the name of the store's table.
func (s *Store) Table() string { return s.table }

// Claim implements [idemstore.Store]. It puts rec with one conditional PutItem that succeeds
// only when nothing holds the key for rec:
//
//	attribute_not_exists(#id) OR #expiration <= :now
//	OR (#status = :inprogress AND #in_progress_expiration <= :now_ms
//	    AND (attribute_not_exists(#lease_token) OR #lease_token <> :released)
//	    AND #checkpoint = :checkpoint AND #checkpoint_seq = :seq
//	    AND #validation = :fingerprint)
//
// :released is [idemstore.ReleasedToken] of rec's token. An absent checkpoint number
// counts as 0 and an absent fingerprint as an empty one. When rec carries no checkpoint,
// the last two lines are (attribute_not_exists(#checkpoint) OR #checkpoint = :empty). An
// empty string counts as no checkpoint: the release before checkpoint numbers wrote it for
// idem.Checkpoint(ctx, ""). The claim thus overwrites:
//
//   - an expired record still in the table (TTL deletion lags);
//   - an in-progress record whose lease has ended, but only by a claim that carries its
//     checkpoint into the new item, with its number, for the same request, and whose own
//     owner has not released the key since (see [Store.Release]).
//
// When the condition fails, DynamoDB returns the record that refused the claim with the
// error (ReturnValuesOnConditionCheckFailure), so a conflict costs one round trip too. A
// strongly consistent GetItem more is needed only for a store that omits it, and for a
// completed record whose result is kept in an item of its own (see [Store.Complete]). Such
// a claim costs one write unit, whatever the result's size, plus the read of the result.
// If that read fails, Claim returns the record it met, without its result, with the error
// (an [idem.ErrStore]), as [idemstore.Store] asks: the key is held, and the guard does not
// fail open ([idem.WithFailOpen]). A record that does not decode yields an error wrapping
// [idem.ErrIncompatibleRecord].
//
// A put that meets a transaction on the item (TransactionConflictException: an owner's
// completion) was not judged, so Claim reads the record. One the claim may replace (an
// expired record counts as absent) is never returned as the refusal: the claim is put
// again. After three puts met by a transaction, Claim returns an error wrapping
// [idem.ErrStore] with a record holding only the key: the transaction may make the record
// live again, so the guard does not fail open.
func (s *Store) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	// Why a takeover needs each part of the condition:
	//
	//   - the checkpoint: it never lives only in a response that can be lost;
	//   - its number: an earlier checkpoint of an equal value, carried by a late claim,
	//     does not do;
	//   - the same request: another request's checkpoint records its own effects;
	//   - no release by the claim's own owner since: such a claim is the first attempt of
	//     a PutItem the SDK resent, landing after the resend's owner ran, failed and
	//     released.
	a := &s.cfg.attrs
	cond, names, values := claimExpr(rec)
	values[":now"] = encodeEpoch(now, expirationUnit)
	values[":now_ms"] = encodeEpoch(now, leaseExpiryUnit)
	values[":inprogress"] = &types.AttributeValueMemberS{Value: string(idemstore.StatusInProgress)}
	values[":released"] = &types.AttributeValueMemberS{Value: idemstore.ReleasedToken(rec.LeaseToken)}
	in := &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                s.encodeRecord(rec),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            a.names(names...),
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	var blocked error // the last transaction conflict met on a record the claim may replace
	for range claimAttempts {
		out, err := s.client.PutItem(ctx, in)
		if err == nil {
			return s.replaced(out.Attributes), true, nil
		}
		var ccf *types.ConditionalCheckFailedException
		var conflict *types.TransactionConflictException
		switch {
		case errors.As(err, &ccf):
		case errors.As(err, &conflict):
			// The owner's completion transaction holds the item right now (the SDK does not
			// retry this): read the record as it stands, as after a failed condition.
		default:
			return nil, false, s.fail("claim", err)
		}
		var item map[string]types.AttributeValue
		if ccf != nil {
			item = ccf.Item
		}
		if len(item) == 0 {
			var gerr error
			if item, gerr = s.getItem(ctx, rec.Key); gerr != nil {
				// A record holds the key (the owner's transaction is on it): say so with
				// the error, so that the guard never fails open over it.
				return metUnread(rec.Key), false, s.fail("claim", gerr)
			}
			if item == nil {
				continue // deleted since the put failed: the key is free, claim again
			}
		}
		if conflict != nil && s.claimable(item, rec, now) {
			// The put was not judged: the record it met may be one the claim replaces
			// (expired, which counts as absent, or lease-ended), never a refusal. Again.
			blocked = err
			continue
		}
		// With the record it met, if it could not read its result: see withResult.
		prev, err := s.withResult(ctx, "claim", item)
		return prev, false, err
	}
	if blocked != nil {
		// A transaction (an owner's completion, which may make the record live again) held
		// the item at every put: a retryable error, with the record met, so that the guard
		// never fails open over it.
		return metUnread(rec.Key), false, s.fail("claim", blocked)
	}
	return nil, false, &idem.StoreError{Op: "claim", Err: fmt.Errorf("dynamo: claim: conflicting record vanished %d times in a row", claimAttempts)}
}

// claimable reports whether item decodes to a record that a claim of rec at now may
// replace ([idemstore.Record.ClaimableBy]): an expired one, say, which counts as absent.
func (s *Store) claimable(item map[string]types.AttributeValue, rec *idemstore.Record, now time.Time) bool {
	prev, err := s.decodeRecord(item)
	return err == nil && prev.ClaimableBy(rec, now)
}

// replaced decodes the item a successful claim overwrote. The claim already holds, so an
// old item that does not decode (an expired record of a newer schema, say) is dropped
// rather than failing it: the claim carried all that was of use in it.
func (s *Store) replaced(item map[string]types.AttributeValue) *idemstore.Record {
	if len(item) == 0 {
		return nil
	}
	prev, err := s.decodeRecord(item)
	if err != nil {
		return nil
	}
	return prev
}

// Get implements [idemstore.Store] with one strongly consistent GetItem, and a second for a
// result kept in an item of its own (see [Store.Complete]). It returns nil and no error
// when there is no record, and an error wrapping [idem.ErrIncompatibleRecord] for an item
// that does not decode. A completed record whose result's item is gone (deleted by hand)
// comes back without its result, as [idemstore.EncodingNone]: a replay of it yields
// idem.ErrResultNotStored and never runs the handler again.
func (s *Store) Get(ctx context.Context, key string) (*idemstore.Record, error) {
	item, err := s.getItem(ctx, key)
	if err != nil {
		return nil, s.fail("get", err)
	}
	if item == nil {
		return nil, nil
	}
	rec, err := s.withResult(ctx, "get", item)
	if err != nil {
		return nil, err
	}
	return rec, nil
}

func (s *Store) getItem(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            s.key(key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// Complete implements [idemstore.Store]. It completes the record as follows:
//
//   - Without attachments it is one UpdateItem of the record to rec's status, result and
//     expiry, conditional on the lease token and on the record being in progress. A
//     worker whose lease was taken over gets [idem.ErrLeaseLost] and never overwrites the
//     new owner's record. A completion that finds the record completed under rec's token
//     already (a resend) writes nothing and returns nil: no completion under a token
//     overwrites another.
//   - With attachments (see [Attach]) it is one TransactWriteItems holding that update
//     first and the attached writes after it, so they commit together or not at all. A
//     resend of a transaction that landed commits nothing. Its failed condition returns
//     the record, which shows it completed under rec's token, and Complete returns nil.
//
// The checkpoint is kept; the lease end is removed. Complete's errors:
//
//   - a failed condition on an attached write: an [*AttachedWriteError] wrapping
//     [idem.ErrConditionFailed];
//   - a record over DynamoDB's item size limit: [idemstore.ErrTooLarge];
//   - an attached write over it: an error wrapping [idem.ErrStore],
//     [idemstore.ErrNotCommitted] and an [*AttachedWriteError] naming it, so the guard
//     releases the key.
//
// A result that would make the record's item larger than 1 KB (see [WithInlineLimit]) is
// kept in an item of its own, with the record's TTL plus an hour. Its key attribute is
// "<key>#result#<lease token>" (for a token not of the guard's form, 32 lowercase hex
// digits, a hash of it instead). One PutItem writes it before the completion, which then
// names it ([Attributes.DataRef]) instead of holding it. If that item holds another
// result already (a completion under the same token with another result: the guard's,
// with the result [idem.OnRefused] chose after the handler's was refused), the result
// goes to "<key>#result#<lease token>.<32 lowercase hex digits of its SHA-256>" instead,
// an item of its own that a resend of the same completion writes again. A replay then
// costs one write unit and a strongly consistent read of the result (one read unit per
// 4 KB), instead of one write unit per KB of the result. A result's item over DynamoDB's
// 400 KB limit, or whose key is over DynamoDB's key limit, yields [idemstore.ErrTooLarge],
// and the completion is not sent. The key limit is 2048 bytes, or 1024 with
// [WithSortKey]; only a record key within 40 bytes of it (73 for a second result under the
// token) reaches it, never the guard's.
//
// Records naming their result are stored at schema version 2. Versions of this package
// that keep every result inline refuse them ([idem.ErrIncompatibleRecord]) rather than
// replay without the result. Records with the result inline, whatever their size, are read
// as before.
func (s *Store) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	ref, result := s.resultApart(rec)
	upd, err := s.completion(rec, ref)
	if err != nil {
		return err
	}
	if result != nil {
		// A claim that meets the completed record conflicts on an item under 1 KB: DynamoDB
		// bills a failed conditional write by the item's size, one write unit per KB. Only
		// the completion that names the result makes it count, and it is conditional on
		// the token: an owner that crashed, or was fenced off, after writing its result
		// leaves an orphan item that nothing names, which TTL removes.
		//
		// Before the completion that names it: a completed record's result is always there.
		err := s.putResult(ctx, ref, result)
		if errors.Is(err, errResultTaken) {
			if cur, gerr := s.getItem(ctx, rec.Key); gerr == nil && s.completedBy(cur, rec) {
				return nil // completed under the token already: nothing is written twice
			}
			// Another result under the token (the handler's, when the guard completes with
			// the result OnRefused chose): this one gets an item of its own, named by the
			// token and its content, which a resend finds again.
			ref, result = s.resultApartAgain(rec, ref, result)
			if upd, err = s.completion(rec, ref); err != nil {
				return err
			}
			err = s.putResult(ctx, ref, result)
			if errors.Is(err, errResultTaken) {
				return s.fail("complete", err)
			}
		}
		if err != nil {
			return err
		}
	}
	upd.ConditionExpression = aws.String(ownedInProgressCondition)
	upd.ExpressionAttributeValues[":inprogress"] = &types.AttributeValueMemberS{Value: string(idemstore.StatusInProgress)}
	if len(attached) == 0 {
		_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           upd.TableName,
			Key:                                 upd.Key,
			UpdateExpression:                    upd.UpdateExpression,
			ConditionExpression:                 upd.ConditionExpression,
			ExpressionAttributeNames:            upd.ExpressionAttributeNames,
			ExpressionAttributeValues:           upd.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) && s.completedAlready(ctx, ccf.Item, rec) {
			return nil // a resend, or another completion under the token: nothing written twice
		}
		return s.leaseFail("complete", err)
	}
	upd.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	items, err := s.transactItems(upd, attached)
	if err != nil {
		return err
	}
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	return s.transactFail(rec, ref, items, err)
}

// completion builds the conditional update that completes rec; ref is the key of its
// result's item when the result is kept apart, else "".
func (s *Store) completion(rec *idemstore.Record, ref string) (*types.Update, error) {
	if rec.LeaseToken == "" {
		return nil, errors.New("dynamo: complete: record has no lease token")
	}
	a := &s.cfg.attrs
	values := map[string]types.AttributeValue{
		":token":  &types.AttributeValueMemberS{Value: rec.LeaseToken},
		":status": &types.AttributeValueMemberS{Value: string(rec.Status)},
		":v":      &types.AttributeValueMemberN{Value: strconv.Itoa(storedVersion(rec, ref))},
	}
	set := []string{phStatus + " = :status", phVersion + " = :v"}
	remove := []string{phLease}
	// Optional attributes are set when present and removed when not, so the item ends up
	// holding exactly rec (and the checkpoint), whatever the claim or an earlier
	// completion wrote.
	names := []string{phStatus, phVersion, phLease, phToken}
	for _, o := range optionalValues(rec, ref) {
		names = append(names, o.ph)
		if o.v == nil {
			remove = append(remove, o.ph)
			continue
		}
		value := ":" + strings.TrimPrefix(o.ph, "#")
		set = append(set, o.ph+" = "+value)
		values[value] = o.v
	}
	return &types.Update{
		TableName:                 aws.String(s.table),
		Key:                       s.key(rec.Key),
		UpdateExpression:          aws.String("SET " + strings.Join(set, ", ") + " REMOVE " + strings.Join(remove, ", ")),
		ConditionExpression:       aws.String(ownedCondition),
		ExpressionAttributeNames:  a.names(names...),
		ExpressionAttributeValues: values,
	}, nil
}

// optionalValue is an optional attribute of a completed record, by placeholder, and its
// value; nil when the record has none.
type optionalValue struct {
	ph string
	v  types.AttributeValue
}

// optionalValues returns rec's optional attributes, with the result inline or, when ref is
// not empty, the key of its result's item instead. A completion sets those present and
// removes the others, so the item ends up holding exactly rec (and the checkpoint),
// whatever the claim or an earlier completion wrote. The key of a result's item is removed
// too when the result is not apart: no record in progress has one (a claim replaces the
// whole item), but the record may already be completed under the same token, by a
// completion whose answer was lost, with its result apart; a completion sent again without
// it (the guard's after [idemstore.ErrTooLarge]) would otherwise leave that data_ref in a
// record of schema version 1, which no read accepts.
func optionalValues(rec *idemstore.Record, ref string) [5]optionalValue {
	o := [5]optionalValue{{ph: phExpiration}, {ph: phEncoding}, {ph: phData}, {ph: phValidation}, {ph: phDataRef}}
	if !rec.Expires.IsZero() {
		o[0].v = encodeEnd(rec.Expires, expirationUnit)
	}
	if rec.Encoding != "" {
		o[1].v = &types.AttributeValueMemberS{Value: rec.Encoding}
	}
	switch {
	case ref != "":
		o[4].v = &types.AttributeValueMemberS{Value: ref}
	case rec.Data != nil:
		o[2].v = encodeData(rec.Data, rec.Encoding)
	}
	if rec.Fingerprint != "" {
		o[3].v = &types.AttributeValueMemberS{Value: rec.Fingerprint}
	}
	return o
}

// storedVersion is the schema version stored for rec: apartVersion when its result is
// kept apart in the item ref.
func storedVersion(rec *idemstore.Record, ref string) int {
	if ref != "" {
		return apartVersion
	}
	return rec.Version
}

// Release implements [idemstore.Store] with one UpdateItem, conditional on the lease token
// and on the record being in progress. It keeps the record as a tombstone:
//
//   - its lease ended at now: the caller's clock, rounded down to the millisecond as a
//     claim's now is, so that a claim at or after now takes it over;
//   - its token is replaced by [idemstore.ReleasedToken](token).
//
// A claim made from then on takes it over at once, with its checkpoint if it has one (see
// [Store.Claim]). The record is never deleted: the tombstone fences off a completion or a
// claim of ours that may still be in flight. An UpdateItem costs the write units a
// DeleteItem of the same item would (both are billed by the item's size). The tombstone
// stays until TTL deletes it at the record's expiry, as a completed record would.
func (s *Store) Release(ctx context.Context, key, token string, now time.Time) error {
	// The record is never deleted, because of two writes that may still be in flight at
	// DynamoDB when the caller releases:
	//
	//   - A completion of ours (a transaction whose answer timed out) is conditional on the
	//     token and the status, which the record would otherwise still satisfy. It could
	//     land after the caller was told that nothing committed.
	//   - The first attempt of our own claim, which the SDK resent after a broken
	//     connection, would find no item and put the in-progress record again. It would
	//     hold the key for a lease nobody owns; the tombstone refuses it, by its token.
	//
	// The tombstone refuses as well, by the lease end, the first attempt of a claim of an
	// earlier owner that released the key before we took it over. That claim was sent
	// before our release, and at its now our lease has not ended.
	a := &s.cfg.attrs
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      s.key(key),
		UpdateExpression:         aws.String("SET " + phLease + " = :ended, " + phToken + " = :released"),
		ConditionExpression:      aws.String(ownedInProgressCondition),
		ExpressionAttributeNames: a.names(phLease, phToken, phStatus),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":ended":      encodeEpoch(now, leaseExpiryUnit),
			":released":   &types.AttributeValueMemberS{Value: idemstore.ReleasedToken(token)},
			":token":      &types.AttributeValueMemberS{Value: token},
			":inprogress": &types.AttributeValueMemberS{Value: string(idemstore.StatusInProgress)},
		},
	})
	return s.leaseFail("release", err)
}

// Extend implements [idemstore.Store] with one UpdateItem of the lease end, conditional on the
// lease token, on the record still being in progress and on the stored end being no later
// than the new one (or absent): an extension never lowers the stored end. The first
// attempt of an earlier beat that the SDK resent may land after a later beat, and would
// otherwise shorten the lease the owner's watchdog counts on. When the condition fails,
// the record comes back with the error (ReturnValuesOnConditionCheckFailure, no extra
// round trip): if it is ours, in progress, and its lease ends at or after leaseExpires,
// the extension succeeds as it is; else it is [idem.ErrLeaseLost]. Only if DynamoDB
// returns no item does a strongly consistent GetItem decide.
func (s *Store) Extend(ctx context.Context, key, token string, leaseExpires time.Time) error {
	a := &s.cfg.attrs
	end := encodeEnd(leaseExpires, leaseExpiryUnit)
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      s.key(key),
		UpdateExpression:         aws.String("SET " + phLease + " = :end"),
		ConditionExpression:      aws.String(extendCondition),
		ExpressionAttributeNames: a.names(phLease, phToken, phStatus),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":end":        end,
			":token":      &types.AttributeValueMemberS{Value: token},
			":inprogress": &types.AttributeValueMemberS{Value: string(idemstore.StatusInProgress)},
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		item := ccf.Item
		if len(item) == 0 {
			if item, err = s.getItem(ctx, key); err != nil {
				return s.fail("extend", err)
			}
		}
		if s.extendedBeyond(item, token, end) {
			return nil
		}
		return fmt.Errorf("dynamo: extend: %w: %w", idem.ErrLeaseLost, ccf)
	}
	if err != nil {
		return s.fail("extend", err)
	}
	return nil
}

// extendedBeyond reports whether item, met by an extension's failed condition, is the
// in-progress record of token with a lease that ends at or after end (as stored).
func (s *Store) extendedBeyond(item map[string]types.AttributeValue, token string, end *types.AttributeValueMemberN) bool {
	if len(item) == 0 {
		return false
	}
	rec, err := s.decodeRecord(item)
	if err != nil || rec.LeaseToken != token || rec.Status != idemstore.StatusInProgress || rec.LeaseExpires.IsZero() {
		return false
	}
	want, err := decodeEpoch(end, leaseExpiryUnit)
	return err == nil && !rec.LeaseExpires.Before(want)
}

// SetCheckpoint implements [idemstore.Store] with one UpdateItem of the checkpoint and its
// number, conditional on the lease token, on the record still being in progress, and on
// the stored number being below seq (or absent, as in records of the Powertools
// utilities), or equal to it with the same checkpoint (a resend of a write that landed,
// which writes the same values again):
//
//	#token = :token AND #status = :inprogress AND (attribute_not_exists(#cpseq)
//	OR #cpseq < :seq OR (#cpseq = :seq AND #cp = :cp))
//
// A late first attempt of an earlier checkpoint, resent by the SDK and landing after a
// later one, thus fails its condition ([idem.ErrLeaseLost], an answer nobody waits for)
// and never replaces the later checkpoint.
func (s *Store) SetCheckpoint(ctx context.Context, key, token, checkpoint string, seq int64) error {
	a := &s.cfg.attrs
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      s.key(key),
		UpdateExpression:         aws.String("SET " + phCheckpoint + " = :cp, " + phCpSeq + " = :seq"),
		ConditionExpression:      aws.String(checkpointCondition),
		ExpressionAttributeNames: a.names(phCheckpoint, phCpSeq, phToken, phStatus),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":cp":         &types.AttributeValueMemberS{Value: checkpoint},
			":seq":        &types.AttributeValueMemberN{Value: strconv.FormatInt(seq, 10)},
			":token":      &types.AttributeValueMemberS{Value: token},
			":inprogress": &types.AttributeValueMemberS{Value: string(idemstore.StatusInProgress)},
		},
	})
	return s.leaseFail("checkpoint", err)
}

// metUnread is the record a claim met but could not read: only its key is known. Claim
// returns it with the read's error, as the Store contract asks of a claim that learned a
// record holds the key, so that the guard answers the error and never fails open.
func metUnread(key string) *idemstore.Record { return &idemstore.Record{Key: key} }
