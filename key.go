package idem

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Request names what a guarded call is about.
type Request struct {
	// Key is the caller's idempotency key. Required; at most [MaxKeyLength] bytes. It is
	// hashed before it reaches the store, so raw keys (which may be personal data) are
	// never stored.
	Key string
	// Tenant, when set, separates keys of different callers (for example an authorizer
	// principal): the same Key from two tenants is two records. It is hashed with the key.
	Tenant string
	// Fingerprint, when non-nil, identifies the request's content (for example a canonical
	// body). A key reused with another fingerprint gets [ErrPayloadMismatch]. Only its hash
	// is stored.
	Fingerprint []byte
}

// StoredKey validates the request's key and returns the key its record is stored under:
// "<scope>#<sha256 hex>". The hash covers the tenant and the key, the tenant
// length-prefixed, so no two (tenant, key) pairs share a record. It returns [ErrMissingKey]
// or [ErrInvalidKey] for a bad key. Use it to find a request's record in the table.
func (g *Guard) StoredKey(r Request) (string, error) {
	if r.Key == "" {
		return "", ErrMissingKey
	}
	if len(r.Key) > MaxKeyLength {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrInvalidKey, MaxKeyLength)
	}
	// Hash on the stack for keys of ordinary length: this runs on every call.
	var scratch [256]byte
	in := binary.BigEndian.AppendUint64(scratch[:0], uint64(len(r.Tenant)))
	in = append(in, r.Tenant...)
	in = append(in, r.Key...)
	sum := sha256.Sum256(in)
	buf := make([]byte, 0, len(g.cfg.scope)+1+2*sha256.Size)
	buf = append(buf, g.cfg.scope...)
	buf = append(buf, '#')
	buf = hex.AppendEncode(buf, sum[:])
	return string(buf), nil
}

// fingerprintHash returns the hex SHA-256 of fp, or "" when fp is nil.
func fingerprintHash(fp []byte) string {
	if fp == nil {
		return ""
	}
	sum := sha256.Sum256(fp)
	return hex.EncodeToString(sum[:])
}

// newToken returns a random lease token.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
