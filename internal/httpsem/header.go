package httpsem

import (
	"strings"

	"github.com/idemkit/idem"
)

// keyError explains why a request's key was refused: reason is safe to show the client.
type keyError struct {
	sentinel error // idem.ErrMissingKey or idem.ErrInvalidKey
	reason   string
}

func (e *keyError) Error() string    { return e.sentinel.Error() + ": " + e.reason }
func (e *keyError) Unwrap() error    { return e.sentinel }
func invalidKey(reason string) error { return &keyError{sentinel: idem.ErrInvalidKey, reason: reason} }

var errNoKeyHeader = &keyError{sentinel: idem.ErrMissingKey, reason: "the request has no idempotency key header"}

// headerValues returns every value of the header name in the event's header maps, matched
// case-insensitively. API Gateway REST events carry a header in both maps, and a map may
// hold one header under two spellings; parseKey reconciles them.
func headerValues(name string, single map[string]string, multi map[string][]string) []string {
	var out []string
	for k, vs := range multi {
		if strings.EqualFold(k, name) {
			out = append(out, vs...)
		}
	}
	for k, v := range single {
		if strings.EqualFold(k, name) {
			out = append(out, v)
		}
	}
	return out
}

// parseKey returns the idempotency key carried by the values of its header.
//
// The header is an RFC 8941 structured field whose value is a string Item, so a quoted key
// is unquoted and its parameters, if any, are ignored; most clients send the key bare, and
// that is accepted too. API Gateway HTTP APIs
// and function URLs join repeated headers with commas, so each value is split into
// comma-separated members outside quotes: every member must be the same key, or the request
// is ambiguous and refused. A key must be 1 to [MaxKeyLength] printable ASCII characters.
//
// It returns errors wrapping [idem.ErrMissingKey] when there is no value, and
// [idem.ErrInvalidKey] otherwise.
func parseKey(values []string) (string, error) {
	var key string
	found := false
	for _, v := range values {
		rest := v
		for {
			member, more, err := nextMember(rest)
			if err != nil {
				return "", err
			}
			k, err := parseMember(member)
			if err != nil {
				return "", err
			}
			if found && k != key {
				return "", invalidKey("the idempotency key header has more than one value")
			}
			key, found = k, true
			if more < 0 {
				break
			}
			rest = rest[more:]
		}
	}
	if !found {
		return "", errNoKeyHeader
	}
	return key, nil
}

// nextMember returns the first comma-separated member of s, trimmed of optional white
// space, and the offset of the rest after the comma, or -1 when it was the last. Commas
// inside a quoted string do not separate.
func nextMember(s string) (member string, more int, err error) {
	quoted, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			return trimOWS(s[:i]), i + 1, nil
		}
	}
	if quoted {
		return "", 0, invalidKey("the idempotency key has an unterminated quoted string")
	}
	return trimOWS(s), -1, nil
}

func trimOWS(s string) string { return strings.Trim(s, " \t") }

// parseMember returns the key in one member: an sf-string (RFC 8941, section 3.3.3),
// unquoted, or a bare key. An sf-string may carry parameters (an Item's, section 3.1.2:
// `"k";v=1`), which are checked and ignored: the key is the string alone, so `"k";v=1`
// and `"k"` are one key. A bare key is not a structured field, so it is taken as it is,
// semicolons included.
func parseMember(m string) (string, error) {
	if strings.HasPrefix(m, `"`) {
		return parseQuoted(m)
	}
	if m == "" {
		return "", invalidKey("the idempotency key is empty")
	}
	if len(m) > MaxKeyLength {
		return "", invalidKey("the idempotency key is longer than 255 characters")
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !printable(c) {
			return "", invalidKey("the idempotency key has a character that is not printable ASCII")
		}
		if c == '"' {
			return "", invalidKey("the idempotency key has a stray double quote")
		}
	}
	return m, nil
}

func parseQuoted(m string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(m); i++ {
		c := m[i]
		switch {
		case c == '\\':
			i++
			if i == len(m) || (m[i] != '"' && m[i] != '\\') {
				return "", invalidKey(`the quoted idempotency key has a backslash not followed by '"' or '\'`)
			}
			b.WriteByte(m[i])
		case c == '"':
			if !checkParameters(m[i+1:]) {
				return "", invalidKey("the idempotency key has characters after its closing quote that are not RFC 8941 parameters")
			}
			k := b.String()
			switch {
			case k == "":
				return "", invalidKey("the idempotency key is empty")
			case len(k) > MaxKeyLength:
				return "", invalidKey("the idempotency key is longer than 255 characters")
			}
			return k, nil
		case !printable(c):
			return "", invalidKey("the idempotency key has a character that is not printable ASCII")
		default:
			b.WriteByte(c)
		}
	}
	return "", invalidKey("the idempotency key has an unterminated quoted string")
}

// printable reports whether c is printable ASCII, space included.
func printable(c byte) bool { return c >= 0x20 && c < 0x7f }
