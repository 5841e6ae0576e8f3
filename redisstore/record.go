package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// Hash fields of a record. The names are those of the DynamoDB store's attributes (and of
// the Powertools for AWS Lambda idempotency utilities); both times are epoch milliseconds,
// the unit of PEXPIREAT.
const (
	fieldStatus     = "status"
	fieldExpiration = "expiration"
	fieldLease      = "in_progress_expiration"
	fieldValidation = "validation"
	fieldData       = "data"
	fieldEncoding   = "enc"
	fieldToken      = "lease_token"
	fieldCheckpoint = "checkpoint"
	fieldCpSeq      = "checkpoint_seq"
	fieldVersion    = "v"
)

// Times are stored as epoch milliseconds. Ends (expiry, lease end) are rounded up and the
// caller's now is rounded down, so a record never counts as expired, nor its lease as ended,
// before the instant the caller asked for (the DynamoDB store rounds the same way).

// endMillis returns t as epoch milliseconds rounded up.
func endMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

// nowMillis returns t as epoch milliseconds rounded down.
func nowMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).After(t) {
		ms-- // before 1970 UnixMilli truncates towards zero
	}
	return ms
}

// fieldArgs returns the hash fields and values that store rec, for HSET: every field rec
// has, except the key, which names the hash, and the checkpoint, which each script handles
// on its own. With lease false the lease end is left out too (a completed record has none).
func fieldArgs(rec *idemstore.Record, lease bool) []any {
	args := make([]any, 0, 16)
	args = append(args, fieldStatus, string(rec.Status), fieldVersion, strconv.Itoa(rec.Version))
	if !rec.Expires.IsZero() {
		args = append(args, fieldExpiration, strconv.FormatInt(endMillis(rec.Expires), 10))
	}
	if lease && !rec.LeaseExpires.IsZero() {
		args = append(args, fieldLease, strconv.FormatInt(endMillis(rec.LeaseExpires), 10))
	}
	if rec.Fingerprint != "" {
		args = append(args, fieldValidation, rec.Fingerprint)
	}
	if rec.Data != nil {
		args = append(args, fieldData, rec.Data)
	}
	if rec.Encoding != "" {
		args = append(args, fieldEncoding, rec.Encoding)
	}
	if rec.LeaseToken != "" {
		args = append(args, fieldToken, rec.LeaseToken)
	}
	if rec.CheckpointSeq != 0 {
		args = append(args, fieldCpSeq, strconv.FormatInt(rec.CheckpointSeq, 10))
	}
	return args
}

// recordSize is the size of rec as stored, in bytes: its key and every field name and
// value, as [Store]'s size limit counts it.
func recordSize(key string, rec *idemstore.Record, args []any) int {
	n := len(key) + len(fieldCheckpoint) + len(rec.Checkpoint)
	for _, a := range args {
		switch v := a.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		}
	}
	return n
}

// expireAt returns the PEXPIREAT argument for rec: its expiry plus grace (see
// [WithExpiryGrace]) in epoch milliseconds, or 0 for a record that never expires. The
// record's own expiration field keeps its Expires: that is when it stops counting.
func expireAt(rec *idemstore.Record, grace time.Duration) int64 {
	if rec.Expires.IsZero() {
		return 0
	}
	return endMillis(rec.Expires.Add(grace))
}

// decodeRecord turns the fields of the hash stored under key into a record. A field that
// does not parse yields an error wrapping [idem.ErrIncompatibleRecord].
func decodeRecord(key string, fields map[string]string) (*idemstore.Record, error) {
	rec := &idemstore.Record{
		Key:         key,
		Status:      idemstore.Status(fields[fieldStatus]),
		Fingerprint: fields[fieldValidation],
		Encoding:    fields[fieldEncoding],
		LeaseToken:  fields[fieldToken],
		Checkpoint:  fields[fieldCheckpoint],
	}
	switch rec.Status {
	case idemstore.StatusInProgress, idemstore.StatusCompleted, idemstore.StatusFailed:
	default:
		return nil, fmt.Errorf("redisstore: record %s: %w: status %q", key, idem.ErrIncompatibleRecord, rec.Status)
	}
	if d, ok := fields[fieldData]; ok {
		rec.Data = []byte(d)
	}
	var err error
	if rec.Expires, err = decodeMillis(fields, fieldExpiration); err != nil {
		return nil, fmt.Errorf("redisstore: record %s: %w: %w", key, idem.ErrIncompatibleRecord, err)
	}
	if rec.LeaseExpires, err = decodeMillis(fields, fieldLease); err != nil {
		return nil, fmt.Errorf("redisstore: record %s: %w: %w", key, idem.ErrIncompatibleRecord, err)
	}
	if v, ok := fields[fieldCpSeq]; ok {
		if rec.CheckpointSeq, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, fmt.Errorf("redisstore: record %s: %w: checkpoint number: %w", key, idem.ErrIncompatibleRecord, err)
		}
	}
	if v, ok := fields[fieldVersion]; ok {
		if rec.Version, err = strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("redisstore: record %s: %w: version: %w", key, idem.ErrIncompatibleRecord, err)
		}
	}
	return rec, nil
}

// decodeMillis reads the epoch-milliseconds field name, the zero time when absent.
func decodeMillis(fields map[string]string, name string) (time.Time, error) {
	v, ok := fields[name]
	if !ok {
		return time.Time{}, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", name, err)
	}
	return time.UnixMilli(ms), nil
}

// pairsToMap turns the flat field, value list of HGETALL, as a script returns it, into a
// map.
func pairsToMap(v any) (map[string]string, error) {
	list, ok := v.([]any)
	if !ok || len(list)%2 != 0 {
		return nil, fmt.Errorf("redisstore: unexpected script reply %T", v)
	}
	m := make(map[string]string, len(list)/2)
	for i := 0; i < len(list); i += 2 {
		k, kok := list[i].(string)
		val, vok := list[i+1].(string)
		if !kok || !vok {
			return nil, fmt.Errorf("redisstore: unexpected script reply field %T=%T", list[i], list[i+1])
		}
		m[k] = val
	}
	return m, nil
}
