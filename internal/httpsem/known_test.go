package httpsem

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// knownFingerprints are bodies with the SHA-256 of their fingerprint (POST /orders?b=2&a=1)
// as the canonicalizer has always made it. Stored records carry these fingerprints (as
// their validation hash), so a change to how bodies are canonicalised must leave every
// one as it is: otherwise each retry of a request recorded before the change is refused
// as a reused key.
var knownFingerprints = []struct {
	name string
	body string
	want string
}{
	{name: "flat", body: `{"sku":"MUG-7","quantity":1}`, want: "374a158a977e1b53e9c8eefc3289ae3ff868a730825923d9958e5d2e4753a07a"},
	{name: "flat reordered, white space", body: "{ \"quantity\" : 1,\n\t\"sku\" : \"MUG-7\" }\n", want: "374a158a977e1b53e9c8eefc3289ae3ff868a730825923d9958e5d2e4753a07a"},
	{name: "nested", body: `{"customer":{"id":"c-1","name":"Ada","tags":["b","a"]},"items":[{"sku":"A","qty":2},{"qty":1,"sku":"B"}],"total":12.50,"paid":false,"note":null}`, want: "b331e6d8060309b73a4dc6885d962bc6b4c67027ac5f08dceb8cdeaed05e8207"},
	{name: "escapes", body: `{"s":"a` + "\u2028" + `b","t":"\/x\n","\u0062":[1e3,-0.0,true,false],"a":"\u00e9\ud83d\ude00","h":"<a href=\"x\">&</a>","é":"ü"}`, want: "9573fc57f7ff3374d20248d53502b6b5f154e350ada31ea6fc9ec837fd54d83b"},
	{name: "case-fold group", body: `{"amount":1,"b":0,"AMOUNT":100}`, want: "a803ddc263d8b6251b5110ba8f7c878a247a1216a526074ae884a4c310b60ff2"},
	{name: "nested case-fold group", body: `{"x":[{"Id":1,"k":0,"id":2,"\u212a":3}],"X":{}}`, want: "08fd4ba97ac228ffcedd8aafe4bc48e101b47fd4fee29eb111885dc009524a38"},
	{name: "duplicate keys", body: `{"a":1,"c":3,"a":2}`, want: "44f20e555f91a260b51ba2f37acd7db3779e0f50c7ee59d6631d4a3fbeca7994"},
	{name: "string", body: `"s"`, want: "fc16417a75ec380e7868a9d1f2f65e3c54c352bb2bdced4b520732be8f2f4ccd"},
	{name: "number", body: ` 12.50 `, want: "e60d1188c323387dc257ce0d653ddf0d6600becb7bfd3e642e5ec66f40df2e6b"},
	{name: "null", body: `null`, want: "047b15e266a73f1e04381b4604c791b2b6d53106fe8d5744bd02bf1a43a35c13"},
	{name: "empty array", body: `[ ]`, want: "28de58f9b34039795aae912da1604335cb7520eaaa19f594ced4bdc3721a3e43"},
	{name: "empty object", body: `{ }`, want: "a4350d3860eb99f16a21ee01c93d8560233fad5f70416c060064f5022fbed9a3"},
	{name: "array of objects", body: `[{"b":1,"a":[{"d":{},"c":[]}]},{"z":"<>"},[],[[{"y":1,"x":2}]]]`, want: "3f2103c04c0ce99f7fdd0a5d691079897c75c5346f836f08eae4364c7b9c2074"},
	{name: "empty", body: ``, want: "624a35867876e7d81224c415e5e4d68f2bb92a12d7dfa779a4ea3692886ff26e"},
	{name: "not JSON", body: `not json`, want: "d0e8358afd6a66a6ba16eac444f7d8c56a1953d7d9bc406f0ee8c5c5ecee452b"},
	{name: "invalid UTF-8", body: "{\"a\":\"\xff\"}", want: "c8e85af50aef682752b3a6ec90fc45aac257e872bc1bdf7e6c130a795800e1ff"},
	{name: "trailing data", body: `{"a":1} {"b":2}`, want: "bc04105d123670fef01c317656ca90dcd13ccd7e8034c77882f6f5c59fba517c"},
	{name: "deep", body: nested(64, `{"v":[1, 2]}`), want: "ff036d96b0bcf96cb283f427f58e746d6fe4a99b3d9b4e836c3195df4ceb3c27"},
	{name: "wide", body: wide(1000), want: "7bd79f17e19f72cb01bfe175ebdabb2ff3fffeecfb87c2dc43d7607a0af94108"},
	{name: "long array", body: "[" + strings.Repeat(`1, "two", {"b":3,"a":4}, `, 1000) + "null]", want: "b0d3dbc327c790447cdf199acde689e105de8be5a1934755e594d2c3630c37f3"},
	{name: "depth 10000", body: strings.Repeat("[ ", 10000) + strings.Repeat("]", 10000), want: "d37e04ecf696adb67b66d2a1b49616f2fda0bd993cb9d7cced09b80a7271b411"},
	{name: "depth 10001", body: strings.Repeat("[ ", 10001) + strings.Repeat("]", 10001), want: "3d36bc3fb195c6d91a820eca7a1f2c04d60baff23970bfcd9726877693007253"},
	{name: "objects 10000 deep", body: nested(10000, `"x"`), want: "df9244890a99d26fbdb00e65c391010fc80b648673b0ce78159ead74dea40bde"},
	{name: "objects 10001 deep", body: nested(10001, `"x"`), want: "2941bcb16155385fa5a697340c173e59537e1e2c06c1248839a9babf6b785f69"},
}

// nested returns inner inside n objects, each {"z":0, "a": ...}.
func nested(n int, inner string) string {
	return strings.Repeat(`{"z":0, "a":`, n) + inner + strings.Repeat("}", n)
}

// wide returns an object of n members, in descending order of name.
func wide(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := n; i > 0; i-- {
		if i < n {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"k%05d":%d`, i, i)
	}
	b.WriteString("}")
	return b.String()
}

// TestKnownFingerprints: the fingerprints of ordinary bodies (and of the deepest ones the
// canonicalizer reads) are the ones records already carry.
func TestKnownFingerprints(t *testing.T) {
	t.Parallel()
	for _, tc := range knownFingerprints {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := Request{Method: "POST", Path: "/orders", RawQuery: "b=2&a=1"}
			sum := sha256.Sum256(r.FingerprintBody([]byte(tc.body)))
			assert.Equal(t, tc.want, hex.EncodeToString(sum[:]))
		})
	}
}
