package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
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
// "<scope>.<operation>#<sha256 hex>". The hash covers the tenant and the key, the tenant
// length-prefixed, so no two (tenant, key) pairs share a record. It returns [ErrMissingKey]
// or [ErrInvalidKey] for a bad key. Use it to find a request's record in the table.
func (g *Guard) StoredKey(r Request) (string, error) {
	key, _, err := g.storedKey(r, false)
	return key, err
}

// keyAndToken returns the stored key of r, as [Guard.StoredKey], and a fresh lease token
// for claiming it, both cut from one allocation: this runs on every call.
func (g *Guard) keyAndToken(r Request) (key, token string, err error) {
	return g.storedKey(r, true)
}

// tokenBytes is how many random bytes a lease token holds; it is hex-encoded.
const tokenBytes = 16

func (g *Guard) storedKey(r Request, withToken bool) (key, token string, err error) {
	if r.Key == "" {
		return "", "", ErrMissingKey
	}
	if len(r.Key) > MaxKeyLength {
		return "", "", fmt.Errorf("%w: longer than %d bytes", ErrInvalidKey, MaxKeyLength)
	}
	// Hash on the stack for keys of ordinary length.
	var scratch [256]byte
	in := binary.BigEndian.AppendUint64(scratch[:0], uint64(len(r.Tenant)))
	in = append(in, r.Tenant...)
	in = append(in, r.Key...)
	sum := sha256.Sum256(in)

	n := len(g.cfg.scope) + 1 + 2*sha256.Size
	size := n
	if withToken {
		size += 2 * tokenBytes
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(g.cfg.scope)
	b.WriteByte('#')
	var hexed [2 * sha256.Size]byte
	hex.Encode(hexed[:], sum[:])
	b.Write(hexed[:])
	if withToken {
		tok := randomToken()
		hex.Encode(hexed[:2*tokenBytes], tok[:])
		b.Write(hexed[:2*tokenBytes])
	}
	s := b.String()
	return s[:n], s[n:], nil
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
	tok := randomToken()
	return hex.EncodeToString(tok[:])
}

// randomToken returns the random bytes of a lease token, from the runtime's ChaCha8
// generator, which the OS seeds per thread. A token must be unique, not secret: it is
// stored in the record beside the key, readable to anyone who can read the table, and
// fences only writers that already hold write access. 128 bits of ChaCha8 output collide
// with negligible probability across calls, threads and processes, and cost a few
// nanoseconds instead of a system call.
func randomToken() [tokenBytes]byte {
	var b [tokenBytes]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return b
}
