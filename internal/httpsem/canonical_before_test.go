package httpsem

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// canonicalBodyBefore is the canonicalizer as it was at 46d728d, before issue 22 item 15
// made it linear in the body's size: each object built in a buffer of its own and copied
// into its parent's. It is kept as the tests' reference: every body it canonicalises must
// come out of canonicalBody the same, since stored records carry the fingerprints it made.
// Only its names differ from the original; it shares endsValue and compareFolded, which
// the change left as they were.
func canonicalBodyBefore(body []byte) []byte {
	// Invalid UTF-8 would decode to U+FFFD and make different bodies look alike. Valid
	// also bounds the nesting depth, and the canonicalizer relies on the syntax it checks.
	if !utf8.Valid(body) || !json.Valid(body) {
		return body
	}
	c := canonicalizerBefore{in: body}
	return c.value(make([]byte, 0, len(body)))
}

// canonicalizerBefore writes the canonical form of one valid JSON document, in one pass.
type canonicalizerBefore struct {
	in  []byte
	pos int
}

// memberBefore is an object member: its decoded name, and its canonical encoding
// ("name":value) at scratch[start:end].
type memberBefore struct {
	name       []byte
	start, end int
}

func (c *canonicalizerBefore) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value appends the canonical encoding of the value at c.pos and moves past it.
func (c *canonicalizerBefore) value(dst []byte) []byte {
	c.skipSpace()
	switch c.in[c.pos] {
	case '{':
		return c.object(dst)
	case '[':
		return c.array(dst)
	case '"':
		_, enc := c.str()
		return append(dst, enc...)
	}
	// A number, true, false or null, written as it is (encoding/json writes a json.Number
	// as it is too).
	start := c.pos
	for c.pos < len(c.in) && !endsValue(c.in[c.pos]) {
		c.pos++
	}
	return append(dst, c.in[start:c.pos]...)
}

func (c *canonicalizerBefore) object(dst []byte) []byte {
	c.pos++ // {
	var (
		scratch []byte
		members []memberBefore
	)
	for {
		c.skipSpace()
		if c.in[c.pos] == '}' {
			c.pos++
			break
		}
		if c.in[c.pos] == ',' {
			c.pos++
			c.skipSpace()
		}
		name, enc := c.str()
		start := len(scratch)
		scratch = append(append(scratch, enc...), ':')
		c.skipSpace()
		c.pos++ // :
		scratch = c.value(scratch)
		members = append(members, memberBefore{name: name, start: start, end: len(scratch)})
	}
	sortMembersBefore(members)
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, scratch[m.start:m.end]...)
	}
	return append(dst, '}')
}

func (c *canonicalizerBefore) array(dst []byte) []byte {
	c.pos++ // [
	dst = append(dst, '[')
	for first := true; ; first = false {
		c.skipSpace()
		switch c.in[c.pos] {
		case ']':
			c.pos++
			return append(dst, ']')
		case ',':
			c.pos++
		}
		if !first {
			dst = append(dst, ',')
		}
		dst = c.value(dst)
	}
}

// str reads the string at c.pos and returns it decoded and in encoding/json's encoding.
func (c *canonicalizerBefore) str() (decoded, encoded []byte) {
	start, escaped := c.pos, false
	for c.pos++; c.in[c.pos] != '"'; c.pos++ {
		if c.in[c.pos] == '\\' {
			escaped = true
			c.pos++ // the escaped byte cannot end the string
		}
	}
	c.pos++
	raw := c.in[start:c.pos]
	if !escaped && !bytes.ContainsAny(raw, "<>&\u2028\u2029") {
		// What encoding/json would write: it escapes only these (HTML characters, and
		// line and paragraph separators) besides what JSON requires escaped.
		return raw[1 : len(raw)-1], raw
	}
	var s string
	_ = json.Unmarshal(raw, &s)  // cannot fail: the string is valid JSON
	encoded, _ = json.Marshal(s) // cannot fail for a string
	return []byte(s), encoded
}

// sortMembersBefore is sortMembers as it was at 46d728d.
func sortMembersBefore(ms []memberBefore) {
	slices.SortStableFunc(ms, func(a, b memberBefore) int { return compareFolded(a.name, b.name) })
	for i := 1; i < len(ms); i++ {
		if compareFolded(ms[i-1].name, ms[i].name) == 0 {
			return
		}
	}
	slices.SortFunc(ms, func(a, b memberBefore) int { return bytes.Compare(a.name, b.name) })
}
