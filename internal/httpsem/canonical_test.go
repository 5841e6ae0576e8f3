package httpsem

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFingerprintKeyCase: keys that Go's decoder matches to one struct field (equal under
// Unicode case folding, exact duplicates included) keep their order, since the last one
// wins; all other keys may come in any order.
func TestFingerprintKeyCase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{name: "case-fold keys swapped", a: `{"amount":1,"AMOUNT":100}`, b: `{"AMOUNT":100,"amount":1}`},
		{name: "three spellings rotated", a: `{"id":1,"Id":2,"ID":3}`, b: `{"Id":2,"ID":3,"id":1}`},
		{name: "duplicate keys swapped", a: `{"a":1,"a":2}`, b: `{"a":2,"a":1}`},
		{name: "duplicate key against its last value", a: `{"a":1,"a":2}`, b: `{"a":2}`},
		{name: "nested case-fold keys swapped", a: `{"x":{"Id":1,"id":2},"y":0}`, b: `{"y":0,"x":{"id":2,"Id":1}}`},
		{name: "in an array", a: `[{"n":1,"N":2}]`, b: `[{"N":2,"n":1}]`},
		{name: "Kelvin sign folds to k", a: `{"k":1,"\u212a":2}`, b: `{"\u212a":2,"k":1}`},
		{name: "long s folds to s", a: `{"s":1,"\u017f":2}`, b: `{"\u017f":2,"s":1}`},
		{name: "other keys around a case-fold group", a: `{"b":0,"amount":1,"AMOUNT":100,"Z":3}`,
			b: `{"amount":1,"Z":3,"AMOUNT":100,"b":0}`, same: true},
		{name: "mixed case, no two keys equal", a: `{"B":1,"a":2,"C":{"y":1,"X":2}}`, b: `{"C":{"X":2,"y":1},"a":2,"B":1}`, same: true},
		{name: "same order, other white space", a: `{"amount":1,"AMOUNT":100}`, b: "{ \"amount\" : 1 ,\n \"AMOUNT\" : 100 }", same: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := (&Request{Method: "POST", Path: "/p", Body: tc.a}).Fingerprint()
			require.NoError(t, err)
			b, err := (&Request{Method: "POST", Path: "/p", Body: tc.b}).Fingerprint()
			require.NoError(t, err)
			if tc.same {
				assert.Equal(t, string(a), string(b))
			} else {
				assert.NotEqual(t, string(a), string(b))
			}
		})
	}
}

// TestCanonicalBodyUnchanged: a body whose objects have no two keys equal under case
// folding canonicalises as it always did (encoding/json of the decoded document), so the
// fingerprints of records stored before case-fold groups were kept still match.
func TestCanonicalBodyUnchanged(t *testing.T) {
	t.Parallel()
	for _, body := range append(fixtureBodies(t), `{"b":[{"y":1,"x":2}],"a":null,"B2":"<&>"}`, `"s"`, `12.50`, `[]`, `{}`,
		"{\"s\":\"a\u2028b\",\"t\":\"\\/x\\n\",\"\\u0062\":[1e3,-0.0,true,false],\"a\":\"\\u00e9\\ud83d\\ude00\"}") {
		if !utf8.ValidString(body) || !json.Valid([]byte(body)) {
			continue // not JSON: taken as it is
		}
		v, err := decodeJSON([]byte(body))
		require.NoError(t, err)
		want, err := json.Marshal(v)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(canonicalBody([]byte(body))), "body %s", body)
	}
}

// FuzzFingerprint checks that a JSON body's fingerprint does not depend on white space or
// on the order of keys that are not equal under case folding, that it does depend on the
// order of keys that are (Go's decoder reads the last of them), that non-JSON bodies are
// fingerprinted as they are, and that every body canonicalises as it did before the
// canonicalizer was made linear (canonicalBodyBefore), so stored fingerprints still match.
// It is seeded with the bodies of the fixtures in testdata, of the known fingerprints,
// and with small bodies of the hostile shapes.
func FuzzFingerprint(f *testing.F) {
	for _, body := range fixtureBodies(f) {
		f.Add(body)
	}
	for _, k := range knownFingerprints {
		if len(k.body) < 4096 {
			f.Add(k.body)
		}
	}
	for _, s := range bodyShapes {
		if b := s.body(64); len(b) < 4096 {
			f.Add(b)
		}
	}
	f.Add(`{"b":[{"y":1,"x":2}],"a":null}`)
	f.Add(`{"a":1,"a":2}`)
	f.Add(`{"amount":1,"b":true,"AMOUNT":100}`)
	f.Add(`{"x":[{"Id":1,"k":0,"id":2,"\u212a":3}],"X":{}}`)
	f.Add(`{"b":{"d":[{"f":1,"e":[2,{"h":3,"g":"<"}]}],"c":{}},"a":[[{"j":0,"i":[]}]]}`)
	f.Add(nested(40, `{"y":[1,{"b":2,"a":3}],"x":"\u00e9"}`))
	f.Add("not json")
	f.Fuzz(func(t *testing.T, body string) {
		assert.Equal(t, string(canonicalBodyBefore([]byte(body))), string(canonicalBody([]byte(body))), "as before")
		r := Request{Method: "POST", Path: "/p", Body: body}
		fp, err := r.Fingerprint()
		require.NoError(t, err)
		if !utf8.ValidString(body) || !json.Valid([]byte(body)) {
			// Not JSON: the body is taken byte for byte, so any change shows.
			r2 := r
			r2.Body = body + " "
			fp2, err := r2.Fingerprint()
			require.NoError(t, err)
			assert.NotEqual(t, fp, fp2)
			return
		}
		v := decodeOrdered(t, []byte(body))
		if !hasFoldGroup(v) {
			// The canonical form of earlier releases, so stored fingerprints still match.
			old, err := decodeJSON([]byte(body))
			require.NoError(t, err)
			want, err := json.Marshal(old)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(canonicalBody([]byte(body))))
		}

		var reordered bytes.Buffer
		writeReordered(t, &reordered, v, true, nil)
		r.Body = reordered.String()
		got, err := r.Fingerprint()
		require.NoError(t, err)
		assert.Equal(t, fp, got, "body %s reordered as %s", body, reordered.String())

		var swapped bytes.Buffer
		swap := true
		writeReordered(t, &swapped, v, true, &swap)
		if swap {
			return // no two members with names equal under case folding differ
		}
		r.Body = swapped.String()
		got, err = r.Fingerprint()
		require.NoError(t, err)
		assert.NotEqual(t, fp, got, "body %s with case-fold keys swapped as %s", body, swapped.String())
	})
}

// orderedMember and orderedObject are a JSON object as written: members in document
// order, duplicates included.
type orderedMember struct {
	name  string
	value any
}

type orderedObject []orderedMember

// decodeOrdered decodes a JSON document with encoding/json's tokenizer, keeping objects as
// written. It is the tests' own reading of a document, apart from the canonicalizer's.
func decodeOrdered(t *testing.T, b []byte) any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var read func() any
	read = func() any {
		tok, err := d.Token()
		require.NoError(t, err)
		switch tok {
		case json.Delim('{'):
			o := orderedObject{}
			for d.More() {
				name, err := d.Token()
				require.NoError(t, err)
				o = append(o, orderedMember{name: name.(string), value: read()})
			}
			_, err := d.Token()
			require.NoError(t, err)
			return o
		case json.Delim('['):
			a := []any{}
			for d.More() {
				a = append(a, read())
			}
			_, err := d.Token()
			require.NoError(t, err)
			return a
		}
		return tok
	}
	return read()
}

// foldGroups splits an object's members into groups whose names are equal under case
// folding (strings.EqualFold), in order of first appearance, each in document order.
func foldGroups(o orderedObject) [][]orderedMember {
	var groups [][]orderedMember
members:
	for _, m := range o {
		for i, g := range groups {
			if strings.EqualFold(g[0].name, m.name) {
				groups[i] = append(g, m)
				continue members
			}
		}
		groups = append(groups, []orderedMember{m})
	}
	return groups
}

// hasFoldGroup reports whether any object in v has two names equal under case folding.
func hasFoldGroup(v any) bool {
	switch v := v.(type) {
	case orderedObject:
		if len(foldGroups(v)) < len(v) {
			return true
		}
		for _, m := range v {
			if hasFoldGroup(m.value) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasFoldGroup(e) {
				return true
			}
		}
	}
	return false
}

// writeReordered writes v, from decodeOrdered, as JSON with extra white space and each
// object's members in another order: its fold groups in reverse order, the members of a
// group in their order. If swap is not nil and *swap is true, the first two neighbours in
// a group that differ change places, and *swap becomes false. With reorder false, v is
// written as it was decoded.
func writeReordered(t *testing.T, buf *bytes.Buffer, v any, reorder bool, swap *bool) {
	switch v := v.(type) {
	case orderedObject:
		groups := [][]orderedMember{v}
		if reorder {
			groups = foldGroups(v)
			slices.Reverse(groups)
		}
		for _, g := range groups {
			for i := 1; swap != nil && *swap && i < len(g); i++ {
				if !strings.EqualFold(g[i-1].name, g[i].name) {
					continue // not reordering: the whole object is one "group"
				}
				if g[i-1].name != g[i].name || canonical(t, g[i-1].value) != canonical(t, g[i].value) {
					g[i-1], g[i] = g[i], g[i-1]
					*swap = false
				}
			}
		}
		buf.WriteString("{ ")
		first := true
		for _, g := range groups {
			for _, m := range g {
				if !first {
					buf.WriteString(" ,\n")
				}
				first = false
				writeReordered(t, buf, m.name, reorder, swap)
				buf.WriteString(" : ")
				writeReordered(t, buf, m.value, reorder, swap)
			}
		}
		buf.WriteString(" }")
	case []any:
		buf.WriteString("[ ")
		for i, e := range v {
			if i > 0 {
				buf.WriteString(" , ")
			}
			writeReordered(t, buf, e, reorder, swap)
		}
		buf.WriteString(" ]")
	default:
		b, err := json.Marshal(v)
		require.NoError(t, err)
		buf.Write(b)
	}
}

// canonical returns the canonical form of a value from decodeOrdered.
func canonical(t *testing.T, v any) string {
	var buf bytes.Buffer
	writeReordered(t, &buf, v, false, nil)
	return string(canonicalBody(buf.Bytes()))
}

// decodeJSON decodes a valid JSON document with json.Number for numbers, as encoding/json
// does before it encodes them back as written.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}
