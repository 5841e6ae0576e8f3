package pgstore

import (
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// row is a record as scanned: NULL columns are nil pointers.
type row struct {
	id, status                       *string
	expires, leaseExpires            *time.Time
	validation, encoding, token, cpt *string
	data                             []byte
	version                          *int32
	cpSeq                            *int64
}

// dest returns the scan destinations in the order of columns.
func (r *row) dest() []any {
	return []any{&r.id, &r.status, &r.expires, &r.leaseExpires, &r.validation, &r.data,
		&r.encoding, &r.token, &r.cpt, &r.version, &r.cpSeq}
}

// record decodes the row. A row without a status or version (written by hand, or by
// another tool) yields an error wrapping [idem.ErrIncompatibleRecord], never a record the
// guard would misread; the guard judges statuses, versions and encodings itself.
func (r *row) record() (*idemstore.Record, error) {
	if r.status == nil || r.version == nil {
		return nil, fmt.Errorf("pgstore: record %q: %w: status or version is NULL", str(r.id), idem.ErrIncompatibleRecord)
	}
	return &idemstore.Record{
		Key:           str(r.id),
		Status:        idemstore.Status(*r.status),
		Expires:       utc(r.expires),
		LeaseExpires:  utc(r.leaseExpires),
		Fingerprint:   str(r.validation),
		Data:          r.data,
		Encoding:      str(r.encoding),
		LeaseToken:    str(r.token),
		Checkpoint:    str(r.cpt),
		CheckpointSeq: seq(r.cpSeq),
		Version:       int(*r.version),
	}, nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func seq(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func utc(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.UTC()
}

// text returns s as a parameter, NULL when empty: a record's absent attribute.
func text(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// end returns a stored end (an expiry or a lease end) as a parameter: NULL when zero, else
// rounded up to PostgreSQL's microseconds, so that a record never ends before its own end.
func end(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	r := t.Truncate(time.Microsecond)
	if r.Before(t) {
		r = r.Add(time.Microsecond)
	}
	return r.UTC()
}

// at returns now as a parameter, rounded down to microseconds: with ends rounded up,
// "end <= now" then holds only when now has reached the end.
func at(now time.Time) time.Time {
	return now.Truncate(time.Microsecond).UTC()
}
