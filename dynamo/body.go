package dynamo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/idemstore"
)

// A result too large for a small record (1 KB by default, see [WithInlineLimit]) is kept
// in an item of its own, the result's item, which the completed record names in
// [Attributes.DataRef].
//
// Why: a claim that meets a completed record is a conditional PutItem that fails, and
// DynamoDB bills a failed conditional write on the size of the item it met, in write
// units of 1 KB. With the result inline, a replay of a 50 KB result (9 KB gzipped) costs 9
// write units; with the result apart, the claim meets a record under 1 KB (1 write unit),
// and the replay reads the result with a strongly consistent GetItem (one read unit per
// 4 KB): one round trip more, for results that do not fit 1 KB only.
//
// Safety rests on three rules:
//   - The result's item is keyed by the record's key and the lease token of the owner that
//     wrote it ("<key>#result#<token>", see resultKey), and written before the completion
//     that names it. A second result under the same token (the guard completes with the
//     one idem.OnRefused chose after the handler's attached writes were refused) has an
//     item of its own, "<key>#result#<token>.<hash of the result>" (see
//     resultApartAgain): an item is written once, and never holds another result than the
//     one a completion naming it sent.
//     The completion is conditional on the token, so a completed record only ever names a
//     result its own owner wrote, and that result is already there. A fenced-off owner's
//     result, or that of an owner that crashed before completing, is named by nothing: an
//     orphan, which TTL removes.
//   - A record names only a result's item of its own key, of the exact form
//     "<key>#result#<32 lowercase hex digits>", optionally followed by '.' and 32 more
//     (decoding checks it), so no record can
//     replay another key's result: a stored key has a single '#', before its hash
//     (idem.WithScope and the operation admit none), so no record key of a guard has
//     that form.
//   - A record that names its result has schema version 2, which readers before this one
//     refuse (idem.ErrIncompatibleRecord) rather than replay it without its result.

const (
	// apartVersion is the schema version stored in a record whose result is apart (2). It
	// is read back as [idemstore.SchemaVersion]: the record is the same, only stored in two
	// items.
	apartVersion = idemstore.SchemaVersion + 1
	// resultSep separates the record's key and the lease token in the key of a result's
	// item. A stored key has one '#', before its hash, so no record key has this form.
	resultSep = "#result#"
	// resultHashSep separates the token and the hash of the result in the key of a second
	// result's item under the same token (see resultApartAgain).
	resultHashSep = "."
	// refTokenLen is the length of the token part of a result's item's key: that of the
	// guard's lease tokens, 16 random bytes in lowercase hex.
	refTokenLen = 32
	// resultGrace is how much longer than its record a result's item lives before TTL may
	// remove it, so that no clock skew between a Lambda function and DynamoDB's TTL lets the
	// result go while the record still counts.
	resultGrace = time.Hour
	// maxPartitionKeySize and maxSortKeySize are DynamoDB's limits on the value of a
	// partition key and of a sort key, in bytes.
	maxPartitionKeySize = 2048
	maxSortKeySize      = 1024
)

// resultKey returns the key of the result's item that the owner of token writes for key:
// "<key>#result#<token>" for a token of the guard's form (32 lowercase hex digits), else
// with the first 32 hex digits of the token's SHA-256 in its place (a store used without
// the guard may pass any token), so that the key always has the one form a record may name
// (see checkRef). Either way a resend writes the same item again.
func resultKey(key, token string) string {
	if !isRefToken(token) {
		sum := sha256.Sum256([]byte(token))
		token = hex.EncodeToString(sum[:refTokenLen/2])
	}
	return key + resultSep + token
}

// resultApartAgain returns the key and the item of rec's result kept apart when the item
// ref, resultKey's, holds another result under the same token: ref followed by '.' and the
// first 32 hex digits of the SHA-256 of the result's encoding and data. Each result under
// a token thus has an item of its own, and a resend of a completion writes the same item
// again.
func (s *Store) resultApartAgain(rec *idemstore.Record, ref string, item map[string]types.AttributeValue) (string, map[string]types.AttributeValue) {
	h := sha256.New()
	h.Write([]byte(rec.Encoding))
	h.Write([]byte{0})
	h.Write(rec.Data)
	ref += resultHashSep + hex.EncodeToString(h.Sum(nil)[:refTokenLen/2])
	again := s.key(ref)
	for name, v := range item {
		if _, isKey := again[name]; !isKey {
			again[name] = v
		}
	}
	return ref, again
}

// isResultRef reports whether s, the part of a result's item's key after resultSep, is of
// one of the two forms Complete writes: a token of refTokenLen lowercase hex digits,
// followed, for a second result under the token (see resultApartAgain), by resultHashSep
// and refTokenLen lowercase hex digits more.
func isResultRef(s string) bool {
	token, sum, again := strings.Cut(s, resultHashSep)
	return isRefToken(token) && (!again || isRefToken(sum))
}

// isRefToken reports whether s is refTokenLen lowercase hex digits.
func isRefToken(s string) bool {
	if len(s) != refTokenLen {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// resultApart decides where rec's result goes. If rec's item would be over the inline
// limit ([WithInlineLimit]) with the result inline, it returns the key of the result's
// item and the item; else "" and nil.
func (s *Store) resultApart(rec *idemstore.Record) (string, map[string]types.AttributeValue) {
	if rec.Data == nil || rec.LeaseToken == "" {
		return "", nil
	}
	if s.inlineSize(rec) <= s.cfg.inlineLimit {
		return "", nil
	}
	ref := resultKey(rec.Key, rec.LeaseToken)
	item := s.key(ref)
	item[s.cfg.attrs.Data] = encodeData(rec.Data, rec.Encoding)
	if !rec.Expires.IsZero() {
		item[s.cfg.attrs.Expiration] = encodeEnd(rec.Expires.Add(resultGrace), expirationUnit)
	}
	return ref, item
}

// checkResultKey returns an error wrapping [idemstore.ErrTooLarge] if ref, the key of a
// result's item, is longer than DynamoDB allows for the key attribute that holds it (a
// sort key with [WithSortKey], else the partition key), else nil. Such an item cannot be
// written (a ValidationException), so the result cannot be kept apart: like a result over
// the item size limit, the guard then completes the record without it, rather than leave
// the key in progress to run again after its lease. The guard's keys are at most 322
// bytes (idem.MaxScopeLength), so only a store used without the guard meets this.
func (s *Store) checkResultKey(ref string) error {
	limit := maxPartitionKeySize
	if s.cfg.sortKey != "" {
		limit = maxSortKeySize
	}
	if len(ref) > limit {
		return fmt.Errorf("dynamo: complete: %w: the key of the result's item is %d bytes, over DynamoDB's limit of %d", idemstore.ErrTooLarge, len(ref), limit)
	}
	return nil
}

// maxNumberSize is the most a number that encodeRecord writes counts (see numberSize): an
// int64 has at most 19 digits and a sign.
const maxNumberSize = (19+1)/2 + 1

// inlineSize returns at least the size DynamoDB counts for rec's item (as encodeRecord
// writes it) with the result inline, at most a few bytes more: the names and the string
// values by their bytes, each number at its largest. It reckons what encodeRecord would
// build, without the ten allocations of building it on every completion.
func (s *Store) inlineSize(rec *idemstore.Record) int {
	a := &s.cfg.attrs
	n := len(a.ID) + len(rec.Key)
	if s.cfg.sortKey != "" {
		n += len(s.cfg.partitionValue) + len(s.cfg.sortKey)
	}
	n += len(a.Status) + len(rec.Status) + len(a.Version) + maxNumberSize
	for _, attr := range [...]struct{ name, v string }{
		{a.Validation, rec.Fingerprint}, {a.Encoding, rec.Encoding},
		{a.LeaseToken, rec.LeaseToken}, {a.Checkpoint, rec.Checkpoint},
	} {
		if attr.v != "" {
			n += len(attr.name) + len(attr.v)
		}
	}
	if rec.CheckpointSeq != 0 {
		n += len(a.CheckpointSeq) + maxNumberSize
	}
	if !rec.Expires.IsZero() {
		n += len(a.Expiration) + maxNumberSize
	}
	if !rec.LeaseExpires.IsZero() {
		n += len(a.InProgressExpiration) + maxNumberSize
	}
	if rec.Data != nil {
		n += len(a.Data) + len(rec.Data)
	}
	return n
}

// putResult writes a result's item, keyed ref, with one PutItem, conditional on there being
// none: its key is its owner's (the lease token's) alone, and a completion under the token
// with another result must not replace the one a completion may name. An item there
// already with the same result (an earlier attempt's) is fine; with another, putResult
// returns errResultTaken, after one more read. An item over
// DynamoDB's size limit, or whose key is over its limit (see checkResultKey, which sends
// nothing), yields [idemstore.ErrTooLarge], and the guard then completes without the
// result.
func (s *Store) putResult(ctx context.Context, ref string, item map[string]types.AttributeValue) error {
	if err := s.checkResultKey(ref); err != nil {
		return err
	}
	// The item is named by the lease token, and written once per result: a completion
	// under the same token with another result (the one the guard chose for refused
	// attached writes) must not replace the result a completion under it may name.
	id := s.cfg.attrs.ID
	if s.cfg.sortKey != "" {
		id = s.cfg.sortKey
	}
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression:      aws.String("attribute_not_exists(#id)"),
		ExpressionAttributeNames: map[string]string{"#id": id}})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		if err != nil {
			return s.fail("complete", err)
		}
		return nil
	}
	old, err := s.getItem(ctx, ref)
	if err != nil {
		return s.fail("complete", err)
	}
	if old != nil && reflect.DeepEqual(old[s.cfg.attrs.Data], item[s.cfg.attrs.Data]) {
		return nil // written by an earlier attempt of this completion
	}
	return errResultTaken
}

// errResultTaken is putResult's answer when the result's item of the token holds another
// result. Complete then returns nil if the record is completed under the token already,
// else keeps its result in an item of its own (see resultApartAgain); on the second
// item's errResultTaken (another result with the same hash) the completion is not sent.
var errResultTaken = errors.New("dynamo: complete: the result's item of this lease token holds another result")

// readResult sets rec's result from the result's item ref with one strongly consistent
// GetItem, a part of op. A result's item that is gone (deleted by hand, or by TTL) leaves
// rec completed without its result ([idemstore.EncodingNone]): a replay then yields
// idem.ErrResultNotStored, and never runs the handler again.
func (s *Store) readResult(ctx context.Context, op string, rec *idemstore.Record, ref string) error {
	item, err := s.getItem(ctx, ref)
	if err != nil {
		return s.fail(op, err)
	}
	return s.setResult(rec, item)
}

// setResult sets rec's result from the result's item, nil if there is none.
func (s *Store) setResult(rec *idemstore.Record, item map[string]types.AttributeValue) error {
	if item == nil {
		rec.Data, rec.Encoding = nil, idemstore.EncodingNone
		return nil
	}
	d := decoder{item: item}
	data := d.data(s.cfg.attrs.Data)
	if d.err == nil && data == nil {
		d.fail(s.cfg.attrs.Data, errors.New("missing in the result's item"))
	}
	if d.err != nil {
		return d.err
	}
	rec.Data = data
	return nil
}

// checkRef checks the result's item that a decoded record names, if any, and sets the
// record's version: a record names a result of its own key, and has version apartVersion
// exactly when it names one.
func (s *Store) checkRef(rec *idemstore.Record, ref string) error {
	a := &s.cfg.attrs
	switch {
	case ref == "" && rec.Version == apartVersion:
		return incompatible(a.DataRef, fmt.Errorf("missing in a record of schema version %d", apartVersion))
	case ref == "":
		return nil
	case rec.Version != apartVersion:
		return incompatible(a.DataRef, fmt.Errorf("in a record of schema version %d", rec.Version))
	case rec.Data != nil:
		return incompatible(a.DataRef, fmt.Errorf("in a record that holds %q too", a.Data))
	case rec.Status == idemstore.StatusInProgress:
		return incompatible(a.DataRef, errors.New("in a record in progress"))
	case !strings.HasPrefix(ref, rec.Key+resultSep) || !isResultRef(ref[len(rec.Key)+len(resultSep):]):
		return incompatible(a.DataRef, fmt.Errorf("names %q, not a result of this record", ref))
	}
	rec.Version = idemstore.SchemaVersion
	return nil
}

// withResult decodes a record item and, if its result is apart, reads it as a part of op:
// the record as a replay needs it. If that read fails, it returns the record without its
// result (Data nil, its encoding as stored) with the error: a claim that met the record
// returns it as prev (see [idemstore.Store]'s Claim), so that the guard knows the key is
// held and never fails open.
func (s *Store) withResult(ctx context.Context, op string, item map[string]types.AttributeValue) (*idemstore.Record, error) {
	rec, ref, err := s.decodeItem(item)
	if err != nil {
		return nil, err
	}
	if ref == "" {
		return rec, nil
	}
	return rec, s.readResult(ctx, op, rec, ref) // rec.Data stays nil if the read fails
}
