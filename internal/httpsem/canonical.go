package httpsem

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode"
	"unicode/utf8"
)

// canonicalBody returns a JSON body re-encoded canonically, so that two encodings of one
// document share a fingerprint; any other body comes back as it is. JSON is recognised by
// content, not by Content-Type, because clients often send JSON without it.
//
// The canonical form has no insignificant white space, keeps numbers as written, and sorts
// each object's members by name, except where their order means something to a Go
// handler: encoding/json matches a name to a struct field in any case, and the last
// matching member wins, so {"amount":1,"AMOUNT":100} reads as 100 and the same members the
// other way round as 1. In an object where two names are equal under Unicode case folding
// (exact duplicates included), members are sorted by folded name instead, and those whose
// names fold alike keep their order. Objects without such names come out exactly as
// encoding/json encodes the decoded document, as they always have.
func canonicalBody(body []byte) []byte {
	// Invalid UTF-8 would decode to U+FFFD and make different bodies look alike. Valid
	// also bounds the nesting depth, and the canonicalizer relies on the syntax it checks.
	if !utf8.Valid(body) || !json.Valid(body) {
		return body
	}
	c := canonicalizer{in: body}
	return c.value(make([]byte, 0, len(body)))
}

// canonicalizer writes the canonical form of one valid JSON document, in one pass.
type canonicalizer struct {
	in  []byte
	pos int
}

// canonicalMember is an object member: its decoded name, and its canonical encoding
// ("name":value) at scratch[start:end].
type canonicalMember struct {
	name       []byte
	start, end int
}

func (c *canonicalizer) skipSpace() {
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
func (c *canonicalizer) value(dst []byte) []byte {
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

// endsValue reports whether b ends a number or literal.
func endsValue(b byte) bool {
	switch b {
	case ',', ']', '}', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

func (c *canonicalizer) object(dst []byte) []byte {
	c.pos++ // {
	var (
		scratch []byte
		members []canonicalMember
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
		members = append(members, canonicalMember{name: name, start: start, end: len(scratch)})
	}
	sortMembers(members)
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, scratch[m.start:m.end]...)
	}
	return append(dst, '}')
}

func (c *canonicalizer) array(dst []byte) []byte {
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
func (c *canonicalizer) str() (decoded, encoded []byte) {
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

// sortMembers orders an object's members by name, unless two names are equal under case
// folding: then by folded name, and members whose names fold alike in their document
// order. Either way, reordering members whose names do not fold alike does not change the
// result, and reordering members whose names do does.
func sortMembers(ms []canonicalMember) {
	slices.SortStableFunc(ms, func(a, b canonicalMember) int { return compareFolded(a.name, b.name) })
	for i := 1; i < len(ms); i++ {
		if compareFolded(ms[i-1].name, ms[i].name) == 0 {
			return
		}
	}
	slices.SortFunc(ms, func(a, b canonicalMember) int { return bytes.Compare(a.name, b.name) })
}

// compareFolded compares a and b rune by rune after case folding, so it returns 0 exactly
// when bytes.EqualFold(a, b), which is when encoding/json matches both names to the same
// struct field.
func compareFolded(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if fa, fb := foldRune(ra), foldRune(rb); fa != fb {
			if fa < fb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b) // both ended, or only the shorter did: it sorts first
}

// foldRune returns the smallest rune of r's case folding orbit (for an ASCII letter, its
// upper case), as encoding/json folds names.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		return r
	}
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}
