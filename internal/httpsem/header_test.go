package httpsem

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		values  []string
		want    string
		wantErr error
	}{
		{name: "bare", values: []string{"8e0b7c1e-2f4d"}, want: "8e0b7c1e-2f4d"},
		{name: "surrounding white space", values: []string{" \tk-1 "}, want: "k-1"},
		{name: "inner space", values: []string{"order 1"}, want: "order 1"},
		{name: "quoted", values: []string{`"k-1"`}, want: "k-1"},
		{name: "quoted escapes", values: []string{`"a\"b\\c"`}, want: `a"b\c`},
		{name: "quoted comma", values: []string{`"a,b"`}, want: "a,b"},
		{name: "all printable", values: []string{"!#$%&'()*+-./:;<=>?@[\\]^_`{|}~"}, want: "!#$%&'()*+-./:;<=>?@[\\]^_`{|}~"},
		{name: "repeated, same", values: []string{"k", "k"}, want: "k"},
		{name: "joined, same", values: []string{"k, k"}, want: "k"},
		{name: "bare and quoted, same", values: []string{"k", `"k"`}, want: "k"},
		{name: "none", values: nil, wantErr: idem.ErrMissingKey},
		{name: "empty", values: []string{""}, wantErr: idem.ErrInvalidKey},
		{name: "blank", values: []string{"  "}, wantErr: idem.ErrInvalidKey},
		{name: "empty quoted", values: []string{`""`}, wantErr: idem.ErrInvalidKey},
		{name: "too long", values: []string{strings.Repeat("x", 256)}, wantErr: idem.ErrInvalidKey},
		{name: "too long quoted", values: []string{`"` + strings.Repeat("x", 256) + `"`}, wantErr: idem.ErrInvalidKey},
		{name: "control", values: []string{"a\nb"}, wantErr: idem.ErrInvalidKey},
		{name: "control quoted", values: []string{"\"a\x00b\""}, wantErr: idem.ErrInvalidKey},
		{name: "non-ASCII", values: []string{"ключ"}, wantErr: idem.ErrInvalidKey},
		{name: "different values", values: []string{"a", "b"}, wantErr: idem.ErrInvalidKey},
		{name: "joined different", values: []string{"a,b"}, wantErr: idem.ErrInvalidKey},
		{name: "empty member", values: []string{"a,,a"}, wantErr: idem.ErrInvalidKey},
		{name: "unterminated", values: []string{`"abc`}, wantErr: idem.ErrInvalidKey},
		{name: "bad escape", values: []string{`"a\nb"`}, wantErr: idem.ErrInvalidKey},
		{name: "trailing backslash", values: []string{`"a\`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter", values: []string{`"k";v=1`}, want: "k"},
		{name: "parameters of every type", values: []string{`"k";a;b=?0;c=?1;d=-12;e=3.141;f="x,\"y\"";g=:aGk=:;h=tok/x:y*;*i=*;j-k.l_m=1`}, want: "k"},
		{name: "parameter after space", values: []string{`"k"; v=1`}, want: "k"},
		{name: "parameters, repeated with and without", values: []string{`"k";v=1`, "k", `"k";v=2`}, want: "k"},
		{name: "parameters, joined", values: []string{`"k";v="a,b", "k"`}, want: "k"},
		{name: "parameters on a bare key are part of it", values: []string{"k;v=1"}, want: "k;v=1"},
		{name: "parameters, different keys", values: []string{`"a";v=1, "b";v=1`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter without key", values: []string{`"k";`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter without value", values: []string{`"k";v=`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter key upper case", values: []string{`"k";V=1`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter key starts with digit", values: []string{`"k";1v=1`}, wantErr: idem.ErrInvalidKey},
		{name: "space before parameter", values: []string{`"k" ;v=1`}, wantErr: idem.ErrInvalidKey},
		{name: "tab after semicolon", values: []string{"\"k\";\tv=1"}, wantErr: idem.ErrInvalidKey},
		{name: "parameter integer too long", values: []string{`"k";v=1234567890123456`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter decimal too precise", values: []string{`"k";v=1.2345`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter decimal without fraction", values: []string{`"k";v=1.`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter decimal integer part too long", values: []string{`"k";v=1234567890123.1`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter minus alone", values: []string{`"k";v=-`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter bad boolean", values: []string{`"k";v=?2`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter unterminated byte sequence", values: []string{`"k";v=:aGk=`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter bad byte sequence", values: []string{`"k";v=:a!:`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter string with a bad escape", values: []string{`"k";v="a\nb"`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter string not printable", values: []string{"\"k\";v=\"\x01\""}, wantErr: idem.ErrInvalidKey},
		{name: "parameter token with a bad character", values: []string{`"k";v=a(b`}, wantErr: idem.ErrInvalidKey},
		{name: "parameter is an inner list", values: []string{`"k";v=(1 2)`}, wantErr: idem.ErrInvalidKey},
		{name: "characters after the parameters", values: []string{`"k";v=1 x`}, wantErr: idem.ErrInvalidKey},
		{name: "characters after the quote", values: []string{`"k"x`}, wantErr: idem.ErrInvalidKey},
		{name: "stray quote", values: []string{`a"b`}, wantErr: idem.ErrInvalidKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseKey(tc.values)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				var ke *keyError
				assert.ErrorAs(t, err, &ke)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestHeaderValues(t *testing.T) {
	t.Parallel()
	got := headerValues("Idempotency-Key",
		map[string]string{"idempotency-key": "a", "Other": "x"},
		map[string][]string{"IDEMPOTENCY-KEY": {"b", "c"}, "other": {"y"}})
	assert.ElementsMatch(t, []string{"a", "b", "c"}, got)
	assert.Empty(t, headerValues("Idempotency-Key", nil, nil))
}

// FuzzParseKey checks that header parsing never panics, accepts only what the header
// grammar allows, and reads a key the same bare, quoted (with or without parameters), or
// repeated; malformed parameters are refused. It is seeded with the
// header values of every fixture in testdata.
func FuzzParseKey(f *testing.F) {
	for _, v := range fixtureKeyValues(f) {
		f.Add(v)
	}
	for _, v := range []string{"", `""`, `"a\"b"`, "a, b", `"a,b", "a,b"`, "\x00", "é", strings.Repeat("k", 256),
		`"k";v=1`, `"k";a;b=?1;c="x,y";d=:aGk=:;e=tok/x:y;f=-1.5`, `"k";`, `"k";v=1.2345`} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		k, err := parseKey([]string{v})
		if err != nil {
			require.True(t, errors.Is(err, idem.ErrMissingKey) || errors.Is(err, idem.ErrInvalidKey),
				"error %v wraps neither sentinel", err)
			return
		}
		require.NotEmpty(t, k)
		require.LessOrEqual(t, len(k), MaxKeyLength)
		for i := 0; i < len(k); i++ {
			require.True(t, printable(k[i]), "key %q has byte %#x", k, k[i])
		}
		again, err := parseKey([]string{sfString(k)})
		require.NoError(t, err, "quoted %q", sfString(k))
		assert.Equal(t, k, again, "quoted form")
		for _, params := range []string{";v=1", `; a;b="x,\"y";c=?0;d=-1.25;e=:aGk=:;f=t/x:*`} {
			withParams, err := parseKey([]string{sfString(k) + params})
			require.NoError(t, err, "quoted %q with parameters %q", k, params)
			assert.Equal(t, k, withParams, "parameters are ignored")
		}
		for _, params := range []string{";", ";V=1", " ;v=1", ";v=", ";v=1.2345", `;v="`, ";v=:a"} {
			_, err := parseKey([]string{sfString(k) + params})
			require.ErrorIs(t, err, idem.ErrInvalidKey, "quoted %q with malformed parameters %q", k, params)
		}
		twice, err := parseKey([]string{v, v})
		require.NoError(t, err)
		assert.Equal(t, k, twice, "repeated header")
		if !strings.ContainsAny(k, `",`) && strings.TrimSpace(k) == k {
			bare, err := parseKey([]string{k})
			require.NoError(t, err)
			assert.Equal(t, k, bare, "bare form")
		}
	})
}

// sfString serialises s as an RFC 8941 string.
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// fixtureKeyValues returns the Idempotency-Key values in the fixtures' header maps.
func fixtureKeyValues(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, ev := range fixtureEvents(tb) {
		out = append(out, headerValues(DefaultHeader, ev.Headers, ev.MultiValueHeaders)...)
	}
	require.NotEmpty(tb, out)
	return out
}

// fixtureEvent is the HTTP part of an event fixture, common to the four shapes.
type fixtureEvent struct {
	Headers           map[string]string   `json:"headers"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	Body              string              `json:"body"`
	IsBase64Encoded   bool                `json:"isBase64Encoded"`
}

// fixtureEvents reads the event fixtures (not the golden files) in testdata, to seed the
// fuzz tests.
func fixtureEvents(tb testing.TB) []fixtureEvent {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "lambdawrap", "testdata", "*.json"))
	require.NoError(tb, err)
	var out []fixtureEvent
	for _, p := range paths {
		if strings.HasSuffix(p, ".golden.json") {
			continue
		}
		b, err := os.ReadFile(p)
		require.NoError(tb, err)
		var ev fixtureEvent
		require.NoError(tb, json.Unmarshal(b, &ev), p)
		out = append(out, ev)
	}
	return out
}
