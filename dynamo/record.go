package dynamo

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo/internal/attrcheck"
	"github.com/idemkit/idem/idemstore"
)

// Units of the two epoch attributes: the TTL attribute must be in epoch seconds for
// DynamoDB's TTL to act on it, and the lease end needs finer resolution than that.
const (
	expirationUnit   = time.Second
	leaseExpiryUnit  = time.Millisecond
	plainJSON        = "json"
	maxEpochFloatAbs = 1 << 62 // beyond this a float does not convert to int64 safely
)

// encodeEpoch returns t as a DynamoDB number of whole units (time.Second or
// time.Millisecond) since the Unix epoch, rounded down. Rounding down everywhere keeps the
// claim condition and [idemstore.Record]'s own expiry checks in agreement: a record whose stored
// end is E counts as ended from the instant E on, in DynamoDB and in Go alike.
func encodeEpoch(t time.Time, unit time.Duration) *types.AttributeValueMemberN {
	per := int64(time.Second / unit)
	n := t.Unix()*per + int64(t.Nanosecond())/int64(unit)
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// encodeEnd writes the end of a record or of a lease as encodeEpoch does, but rounded up to
// the unit: claims compare it with the claimer's time rounded down (":now"), and an end
// rounded down would let a claim replace a record up to one unit before it ends.
func encodeEnd(t time.Time, unit time.Duration) *types.AttributeValueMemberN {
	if r := t.Truncate(unit); !r.Equal(t) {
		t = r.Add(unit)
	}
	return encodeEpoch(t, unit)
}

// decodeEpoch reads a number of whole units since the Unix epoch, as [encodeEpoch] writes
// it. It also accepts a number with a fraction or exponent, as other writers may store, and
// rounds it down.
func decodeEpoch(av types.AttributeValue, unit time.Duration) (time.Time, error) {
	num, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return time.Time{}, fmt.Errorf("want a number, got %s", attrcheck.TypeName(av))
	}
	n, err := strconv.ParseInt(num.Value, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(num.Value, 64)
		if ferr != nil || math.IsNaN(f) || math.Abs(f) > maxEpochFloatAbs {
			return time.Time{}, fmt.Errorf("bad epoch number %q", num.Value)
		}
		n = int64(math.Floor(f))
	}
	per := int64(time.Second / unit)
	sec, rem := n/per, n%per
	if rem < 0 {
		sec, rem = sec-1, rem+per
	}
	return time.Unix(sec, rem*int64(unit)).UTC(), nil
}

// key returns the primary key of the record for key.
func (s *Store) key(key string) map[string]types.AttributeValue {
	if s.cfg.sortKey == "" {
		return map[string]types.AttributeValue{s.cfg.attrs.ID: &types.AttributeValueMemberS{Value: key}}
	}
	return map[string]types.AttributeValue{
		s.cfg.attrs.ID: &types.AttributeValueMemberS{Value: s.cfg.partitionValue},
		s.cfg.sortKey:  &types.AttributeValueMemberS{Value: key},
	}
}

// encodeRecord returns the item for rec. Zero fields are left out.
func (s *Store) encodeRecord(rec *idemstore.Record) map[string]types.AttributeValue {
	a := &s.cfg.attrs
	item := s.key(rec.Key)
	item[a.Status] = &types.AttributeValueMemberS{Value: string(rec.Status)}
	item[a.Version] = &types.AttributeValueMemberN{Value: strconv.Itoa(rec.Version)}
	putString := func(name, v string) {
		if v != "" {
			item[name] = &types.AttributeValueMemberS{Value: v}
		}
	}
	putString(a.Validation, rec.Fingerprint)
	putString(a.Encoding, rec.Encoding)
	putString(a.LeaseToken, rec.LeaseToken)
	putString(a.Checkpoint, rec.Checkpoint)
	if rec.CheckpointSeq != 0 {
		item[a.CheckpointSeq] = &types.AttributeValueMemberN{Value: strconv.FormatInt(rec.CheckpointSeq, 10)}
	}
	if !rec.Expires.IsZero() {
		item[a.Expiration] = encodeEnd(rec.Expires, expirationUnit)
	}
	if !rec.LeaseExpires.IsZero() {
		item[a.InProgressExpiration] = encodeEnd(rec.LeaseExpires, leaseExpiryUnit)
	}
	if rec.Data != nil {
		item[a.Data] = encodeData(rec.Data, rec.Encoding)
	}
	return item
}

// encodeData stores plain JSON as a string, so records read like those of the Powertools
// utilities, and anything else (compressed, or another codec) as binary.
func encodeData(data []byte, enc string) types.AttributeValue {
	if enc == plainJSON && utf8.Valid(data) {
		return &types.AttributeValueMemberS{Value: string(data)}
	}
	return &types.AttributeValueMemberB{Value: data}
}

// decodeRecord reads a record item. A missing or mistyped attribute, an unknown status or a
// schema version above [idemstore.SchemaVersion] is an error wrapping
// [idem.ErrIncompatibleRecord]; it never panics. An attribute of type NULL counts as absent.
// A record whose result is kept apart comes back without it: see [Store.withResult] for
// the record with its result.
func (s *Store) decodeRecord(item map[string]types.AttributeValue) (*idemstore.Record, error) {
	rec, _, err := s.decodeItem(item)
	return rec, err
}

// decodeItem is decodeRecord that also returns the key of the result's item the record
// names, or "" when its result (if any) is inline.
func (s *Store) decodeItem(item map[string]types.AttributeValue) (*idemstore.Record, string, error) {
	a := &s.cfg.attrs
	keyAttr := a.ID
	if s.cfg.sortKey != "" {
		keyAttr = s.cfg.sortKey
	}
	d := decoder{item: item}
	rec := &idemstore.Record{
		Key:           d.str(keyAttr, true),
		Status:        idemstore.Status(d.str(a.Status, true)),
		Fingerprint:   d.str(a.Validation, false),
		Encoding:      d.str(a.Encoding, false),
		LeaseToken:    d.str(a.LeaseToken, false),
		Checkpoint:    d.str(a.Checkpoint, false),
		CheckpointSeq: d.seq(a.CheckpointSeq),
		Data:          d.data(a.Data),
		Expires:       d.epoch(a.Expiration, expirationUnit),
		LeaseExpires:  d.epoch(a.InProgressExpiration, leaseExpiryUnit),
		Version:       d.version(a.Version),
	}
	ref := d.str(a.DataRef, false)
	if d.err != nil {
		return nil, "", d.err
	}
	switch rec.Status {
	case idemstore.StatusInProgress, idemstore.StatusCompleted, idemstore.StatusFailed:
	default:
		return nil, "", incompatible(a.Status, fmt.Errorf("unknown status %q", rec.Status))
	}
	if rec.Version < 0 || rec.Version > apartVersion {
		return nil, "", incompatible(a.Version, fmt.Errorf("schema version %d, this package reads up to %d", rec.Version, apartVersion))
	}
	if err := s.checkRef(rec, ref); err != nil {
		return nil, "", err
	}
	return rec, ref, nil
}

func incompatible(attr string, err error) error {
	return fmt.Errorf("dynamo: %w: attribute %q: %w", idem.ErrIncompatibleRecord, attr, err)
}

// decoder reads attributes of one item, keeping the first error.
type decoder struct {
	item map[string]types.AttributeValue
	err  error
}

// get returns the attribute, or nil if it is absent or NULL.
func (d *decoder) get(name string, required bool) types.AttributeValue {
	av, ok := d.item[name]
	if _, null := av.(*types.AttributeValueMemberNULL); !ok || av == nil || null {
		if required && d.err == nil {
			d.err = incompatible(name, errors.New("missing"))
		}
		return nil
	}
	return av
}

func (d *decoder) fail(name string, err error) {
	if d.err == nil {
		d.err = incompatible(name, err)
	}
}

func (d *decoder) str(name string, required bool) string {
	av := d.get(name, required)
	if av == nil {
		return ""
	}
	v, ok := av.(*types.AttributeValueMemberS)
	if !ok {
		d.fail(name, fmt.Errorf("want a string, got %s", attrcheck.TypeName(av)))
		return ""
	}
	if required && v.Value == "" {
		d.fail(name, errors.New("empty"))
	}
	return v.Value
}

func (d *decoder) data(name string) []byte {
	switch v := d.get(name, false).(type) {
	case nil:
		return nil
	case *types.AttributeValueMemberS:
		return []byte(v.Value)
	case *types.AttributeValueMemberB:
		return v.Value
	default:
		d.fail(name, fmt.Errorf("want a string or binary, got %s", attrcheck.TypeName(v)))
		return nil
	}
}

func (d *decoder) epoch(name string, unit time.Duration) time.Time {
	av := d.get(name, false)
	if av == nil {
		return time.Time{}
	}
	t, err := decodeEpoch(av, unit)
	if err != nil {
		d.fail(name, err)
	}
	return t
}

func (d *decoder) version(name string) int {
	av := d.get(name, false)
	if av == nil {
		return 0
	}
	num, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		d.fail(name, fmt.Errorf("want a number, got %s", attrcheck.TypeName(av)))
		return 0
	}
	v, err := strconv.ParseInt(num.Value, 10, 32)
	if err != nil {
		d.fail(name, fmt.Errorf("bad version %q", num.Value))
		return 0
	}
	return int(v)
}

// seq reads a checkpoint number: a whole number, 0 when absent.
func (d *decoder) seq(name string) int64 {
	av := d.get(name, false)
	if av == nil {
		return 0
	}
	num, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		d.fail(name, fmt.Errorf("want a number, got %s", attrcheck.TypeName(av)))
		return 0
	}
	v, err := strconv.ParseInt(num.Value, 10, 64)
	if err != nil || v < 0 {
		d.fail(name, fmt.Errorf("bad checkpoint number %q", num.Value))
		return 0
	}
	return v
}

// maxItemSize is DynamoDB's limit on the size of one item: 400 KB.
const maxItemSize = 400 * 1024

// itemSize returns the size DynamoDB counts for item, following its documented rules: each
// attribute's name in UTF-8 bytes plus its value; a string's UTF-8 bytes, a binary's bytes,
// a number's significant digits two to a byte plus one, one byte for a boolean or null, and
// for a list or map three bytes plus one per element besides the elements (and, for a map,
// their names). A number is counted at its largest, so the size is never under DynamoDB's.
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, av := range item {
		n += len(name) + valueSize(av)
	}
	return n
}

func valueSize(av types.AttributeValue) int {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		return totalLen(v.Value)
	case *types.AttributeValueMemberBS:
		return totalLen(v.Value)
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3 + len(v.Value)
		for _, e := range v.Value {
			n += valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		return 3 + len(v.Value) + itemSize(v.Value)
	default:
		return 0
	}
}

// totalLen returns the summed lengths of vs.
func totalLen[E ~string | ~[]byte](vs []E) int {
	n := 0
	for _, v := range vs {
		n += len(v)
	}
	return n
}

// numberSize counts a number by its digits, leading and trailing zeros included (DynamoDB
// drops them, so this is an upper bound): one byte per two digits, plus one.
func numberSize(s string) int {
	digits := 0
	for _, c := range s {
		if c == 'e' || c == 'E' {
			break
		}
		if c >= '0' && c <= '9' {
			digits++
		}
	}
	return (digits+1)/2 + 1
}
