package httpsem

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode"
	"unicode/utf8"
)

// maxCanonicalDepth is how deeply a JSON body may nest (objects and arrays) and still be
// canonicalised: the depth encoding/json decodes (json.Valid refuses deeper documents), so
// a Go handler could not read a deeper body anyway. A deeper body is fingerprinted as it
// is, byte for byte: a retry with the same bytes matches, one with its keys reordered does
// not.
const maxCanonicalDepth = 10000

// canonicalBody returns a JSON body re-encoded canonically, so that two encodings of one
// document share a fingerprint. Any other body comes back as it is, and so does one nested
// deeper than maxCanonicalDepth. JSON is recognised by content, not by Content-Type,
// because clients often send JSON without it. The canonical form:
//
//   - has no insignificant white space, and keeps numbers as written;
//   - sorts each object's members by name;
//   - sorts by folded name instead the members of an object where two names are equal
//     under Unicode case folding (exact duplicates included), and keeps the order of those
//     whose names fold alike. Their order means something to a Go handler: encoding/json
//     matches a name to a struct field in any case, and the last matching member wins, so
//     {"amount":1,"AMOUNT":100} reads as 100 and the same members the other way round as 1.
//
// Objects without such names come out exactly as encoding/json encodes the decoded
// document, as they always have. Time and memory are linear in the body's size (n log n
// in an object's members, which are sorted), whatever its shape.
func canonicalBody(body []byte) []byte {
	// Invalid UTF-8 would decode to U+FFFD and make different bodies look alike. Both
	// passes rely on the syntax json.Valid checks.
	if !utf8.Valid(body) || !json.Valid(body) {
		return body
	}
	c := canonicalizer{in: body}
	if _, ok := c.index(0); !ok {
		return body // nested too deeply
	}
	c.pos = 0
	return c.value(make([]byte, 0, len(body)))
}

// canonicalizer writes the canonical form of one valid JSON document, in time and memory
// linear in its size whatever its shape. A first pass (index) records where each object or
// array that holds another one ends. The second (value) writes the output once, front to
// back: for each object it reads the members' names, jumping over their values by those
// ends, sorts them, and writes each member from its place in the body. Nothing is copied
// once per enclosing object, as it was when each object was built in a buffer of its own
// and then copied into its parent's: 10,000 nested objects around a long string copied the
// string 10,000 times.
type canonicalizer struct {
	in  []byte
	pos int
	// spans are the objects and arrays that hold an object or array, in the order they
	// start. The others are skipped by reading them: they hold no nesting to read again.
	spans []canonicalSpan
	// members holds the members of the object being read, and order the offsets of the
	// members of the objects being written, each object's in canonical order, innermost
	// last.
	members []canonicalMember
	order   []int
}

// canonicalSpan is where an object or array starts ('{' or '[') and ends (after '}' or
// ']') in the body.
type canonicalSpan struct{ start, end int }

// canonicalMember is an object member: its decoded name, and the offset of the name's
// opening quote in the body (its value follows the name).
type canonicalMember struct {
	name []byte
	pos  int
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

// index moves past the value at c.pos, which is at nesting depth depth, recording the
// span of every object or array in it that holds another. It reports whether the value is
// an object or array, and false in ok if it nests deeper than maxCanonicalDepth.
func (c *canonicalizer) index(depth int) (container, ok bool) {
	c.skipSpace()
	switch c.in[c.pos] {
	case '{', '[':
		return true, depth < maxCanonicalDepth && c.indexContainer(depth+1)
	case '"':
		c.skipString()
	default:
		c.skipLiteral()
	}
	return false, true
}

// indexContainer is index for an object or array. An object's member names are read as
// values, and ':' as a separator: only the nesting counts here.
func (c *canonicalizer) indexContainer(depth int) bool {
	i := len(c.spans)
	c.spans = append(grow(c.spans, 1), canonicalSpan{start: c.pos})
	c.pos++ // { or [
	nested := false
	for {
		c.skipSpace()
		switch c.in[c.pos] {
		case '}', ']':
			c.pos++
			if nested {
				c.spans[i].end = c.pos
			} else {
				c.spans = c.spans[:i] // nothing recorded after it: it holds no span
			}
			return true
		case ',', ':':
			c.pos++
		default:
			container, ok := c.index(depth)
			if !ok {
				return false
			}
			nested = nested || container
		}
	}
}

// grow returns s with room for n more elements, its capacity at least doubled if it grows,
// so that all a slice ever allocates is at most about twice what it ends with (append
// grows large slices by a quarter, which allocates about five times as much in all).
func grow[S ~[]E, E any](s S, n int) S {
	if len(s)+n <= cap(s) {
		return s
	}
	t := make(S, len(s), max(2*cap(s), len(s)+n, 16))
	copy(t, s)
	return t
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
		return append(dst, c.str()...)
	}
	// A number, true, false or null, written as it is (encoding/json writes a json.Number
	// as it is too).
	start := c.pos
	c.skipLiteral()
	return append(dst, c.in[start:c.pos]...)
}

// object appends the canonical encoding of the object at c.pos: it reads the members'
// names, skipping their values, sorts them, and writes each member in that order.
func (c *canonicalizer) object(dst []byte) []byte {
	c.pos++ // {
	c.members = c.members[:0]
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
		pos := c.pos
		c.members = append(grow(c.members, 1), canonicalMember{name: c.name(), pos: pos})
		c.skipSpace()
		c.pos++ // :
		c.skipValue()
	}
	end := c.pos
	sortMembers(c.members)
	base := len(c.order)
	c.order = grow(c.order, len(c.members))
	for _, m := range c.members {
		c.order = append(c.order, m.pos)
	}
	clear(c.members) // let go of decoded names
	dst = append(dst, '{')
	// Writing a member's value grows c.order with the members of the objects inside it,
	// and may move it, so members are read from it by index.
	for i, n := base, len(c.order); i < n; i++ {
		if i > base {
			dst = append(dst, ',')
		}
		c.pos = c.order[i]
		dst = append(append(dst, c.str()...), ':')
		c.skipSpace()
		c.pos++ // :
		dst = c.value(dst)
	}
	c.order = c.order[:base]
	c.pos = end
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

// skipValue moves past the value at c.pos: past an object or array that holds another by
// its recorded span, past anything else by reading it.
func (c *canonicalizer) skipValue() {
	c.skipSpace()
	switch c.in[c.pos] {
	case '{', '[':
		i, found := slices.BinarySearchFunc(c.spans, c.pos, func(s canonicalSpan, pos int) int { return s.start - pos })
		if found {
			c.pos = c.spans[i].end
			return
		}
		// It holds no object or array: its first unquoted '}' or ']' ends it.
		for c.pos++; c.in[c.pos] != '}' && c.in[c.pos] != ']'; {
			if c.in[c.pos] == '"' {
				c.skipString()
			} else {
				c.pos++
			}
		}
		c.pos++
	case '"':
		c.skipString()
	default:
		c.skipLiteral()
	}
}

// skipLiteral moves past the number, true, false or null at c.pos.
func (c *canonicalizer) skipLiteral() {
	for c.pos < len(c.in) && !endsValue(c.in[c.pos]) {
		c.pos++
	}
}

// endsValue reports whether b ends a number or literal.
func endsValue(b byte) bool {
	switch b {
	case ',', ']', '}', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// skipString moves past the string at c.pos and reports whether it has escapes.
func (c *canonicalizer) skipString() (escaped bool) {
	c.pos++ // "
	for {
		// The string is valid JSON, so a quote ends it; a backslash before that quote
		// escapes the byte after it, which may be a quote.
		q := bytes.IndexByte(c.in[c.pos:], '"')
		b := bytes.IndexByte(c.in[c.pos:c.pos+q], '\\')
		if b < 0 {
			c.pos += q + 1
			return escaped
		}
		escaped = true
		c.pos += b + 2
	}
}

// name reads the string at c.pos and returns it decoded.
func (c *canonicalizer) name() []byte {
	start := c.pos
	if !c.skipString() {
		return c.in[start+1 : c.pos-1]
	}
	var s string
	_ = json.Unmarshal(c.in[start:c.pos], &s) // cannot fail: the string is valid JSON
	return []byte(s)
}

// str reads the string at c.pos and returns it in encoding/json's encoding.
func (c *canonicalizer) str() []byte {
	start := c.pos
	escaped := c.skipString()
	raw := c.in[start:c.pos]
	if !escaped && !bytes.ContainsAny(raw, "<>&\u2028\u2029") {
		// What encoding/json would write: it escapes only these (HTML characters, and
		// line and paragraph separators) besides what JSON requires escaped.
		return raw
	}
	var s string
	_ = json.Unmarshal(raw, &s)   // cannot fail: the string is valid JSON
	encoded, _ := json.Marshal(s) // cannot fail for a string
	return encoded
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
