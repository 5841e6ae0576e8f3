package httpsem

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shape is a JSON body of a given size, by how its bytes are laid out.
type shape struct {
	name string
	body func(size int) string
}

// bodyShapes are the layouts the fingerprint must handle in time and memory linear in the
// body's size: flat ones, and the hostile ones (deep nesting around a large string, one
// wide object, long arrays).
var bodyShapes = []shape{
	{name: "flat string", body: func(size int) string { return `{"data":"` + strings.Repeat("x", size) + `"}` }},
	{name: "flat order", body: func(size int) string {
		var b strings.Builder
		b.WriteString(`{"customer":"c-1","items":[`)
		for i := 0; b.Len() < size; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"sku":"SKU-%d","qty":%d,"price":"12.50"}`, i, i%7)
		}
		b.WriteString(`],"total":"1.00"}`)
		return b.String()
	}},
	{name: "deep objects around a string", body: func(size int) string { return nested(10000, `"`+strings.Repeat("x", size)+`"`) }},
	{name: "deep arrays around a string", body: func(size int) string {
		return strings.Repeat("[", 10000) + `"` + strings.Repeat("x", size) + `"` + strings.Repeat("]", 10000)
	}},
	{name: "wide object", body: func(size int) string { return wide(size / 12) }},
	{name: "long array", body: func(size int) string { return "[" + strings.Repeat("1,", size/2) + "1]" }},
	{name: "long array of objects", body: func(size int) string { return "[" + strings.Repeat(`{"b":1,"a":2},`, size/14) + "{}]" }},
	{name: "deep objects, wide at each level", body: func(size int) string {
		level := `"m":` + `"` + strings.Repeat("y", size/10000) + `", `
		return strings.Repeat(`{`+level+`"z":0, "a":`, 5000) + "1" + strings.Repeat("}", 5000)
	}},
}

// TestFingerprintMemoryIsLinear: canonicalising a body allocates a bounded multiple of its
// size whatever its shape; nesting does not multiply it (before, each of 10,000 nested
// objects copied everything inside it into its parent: 10,000 copies of the string).
func TestFingerprintMemoryIsLinear(t *testing.T) {
	const size = 200 << 10
	for _, s := range bodyShapes {
		body := []byte(s.body(size) + " ")
		require.NotEqual(t, body, canonicalBody(body), "%s: canonicalised, not taken raw", s.name)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		canonicalBody(body)
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		assert.Less(t, allocated, uint64(12*len(body)), "%s: %d bytes allocated for a body of %d", s.name, allocated, len(body))
	}
}

// BenchmarkFingerprint fingerprints bodies of about 2 MB of each shape.
func BenchmarkFingerprint(b *testing.B) {
	for _, s := range bodyShapes {
		body := []byte(s.body(2 << 20))
		r := Request{Method: "POST", Path: "/orders"}
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				r.FingerprintBody(body)
			}
		})
	}
}
