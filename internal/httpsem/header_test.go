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
		{name: "parameters", values: []string{`"a";x=1`}, wantErr: idem.ErrInvalidKey},
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
// grammar allows, and reads a key the same bare, quoted, or repeated. It is seeded with the
// header values of every fixture in testdata.
func FuzzParseKey(f *testing.F) {
	for _, v := range fixtureKeyValues(f) {
		f.Add(v)
	}
	for _, v := range []string{"", `""`, `"a\"b"`, "a, b", `"a,b", "a,b"`, "\x00", "é", strings.Repeat("k", 256)} {
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
