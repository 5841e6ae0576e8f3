package attrcheck_test

import (
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/dynamo/internal/attrcheck"
)

// TestParseNumber pins the values of the numbers DynamoDB takes and refuses the others;
// dynamomem's TestAttachValidationAsOnDynamoDB shows DynamoDB Local agrees.
func TestParseNumber(t *testing.T) {
	t.Parallel()
	digits38 := "12345678901234567890123456789012345678"
	for _, tc := range []struct {
		in   string
		want string // the value as big.Rat writes it; "" for a refusal
	}{
		{"0", "0"}, {"-0", "0"}, {"+1", "1"}, {".5", "1/2"}, {"5.", "5"}, {"1.e3", "1000"},
		{"-0.5e-3", "-1/2000"}, {"00012", "12"}, {"1E+5", "100000"}, {"\u0663", "3"},
		{"0E2147483647", "0"}, {"0E-500", "0"}, {digits38, digits38}, {digits38 + "000", digits38 + "000"},
		{"9.9999999999999999999999999999999999999E+125", "99999999999999999999999999999999999999" + strings.Repeat("0", 88)},
		{"1E-130", "1/1" + strings.Repeat("0", 130)}, {"10E-131", "1/1" + strings.Repeat("0", 130)},
		{"", ""}, {" 1", ""}, {"1 ", ""}, {"0x10", ""}, {"1/3", ""}, {"1_000", ""}, {"NaN", ""},
		{"Infinity", ""}, {"-", ""}, {".", ""}, {"e5", ""}, {"1e", ""}, {"1e+", ""}, {"1e5e3", ""},
		{"+-1", ""}, {"1..2", ""}, {"1E2147483648", ""}, {"1E-2147483648", ""}, {"1E00000000001", "10"},
		{digits38 + "9", ""}, {"1E+126", ""}, {"1E2147483647", ""}, {"1E-131", ""}, {"0.99E-130", ""},
	} {
		got, err := attrcheck.ParseNumber(tc.in)
		if tc.want == "" {
			assert.Error(t, err, "%q", tc.in)
			continue
		}
		if assert.NoError(t, err, "%q", tc.in) {
			assert.Equal(t, tc.want, got.RatString(), "%q", tc.in)
		}
	}
}

// TestCheckNumber: a computed number DynamoDB cannot store is refused.
func TestCheckNumber(t *testing.T) {
	t.Parallel()
	rat := func(s string) *big.Rat {
		r, ok := new(big.Rat).SetString(s)
		require.True(t, ok, s)
		return r
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"0", true}, {"-5", true}, {"1e37", true},
		{"100000000000000000000000000000000000005", false}, // 39 digits
		{"10000000000000000000000000000000000005", true},   // 38
		{"1e126", false}, {"-9.9999999999999999999999999999999999999e125", true},
		{"5e-131", false}, {"1e-130", true}, {"1/3", false},
	} {
		err := attrcheck.CheckNumber(rat(tc.in))
		if tc.ok {
			assert.NoError(t, err, tc.in)
		} else {
			assert.Error(t, err, tc.in)
		}
	}
}

// FuzzParseNumber: ParseNumber never panics, and a number it takes reads back as the same
// value when written out as a plain decimal, which it also takes.
func FuzzParseNumber(f *testing.F) {
	for _, s := range []string{"0", "-0.5e-3", "1E+125", "1E-130", "0x10", "1/3", "\u0663", "1.e3", "9.9999999999999999999999999999999999999E+125"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := attrcheck.ParseNumber(s)
		if err != nil {
			return
		}
		plain := r.FloatString(170)
		back, err := attrcheck.ParseNumber(plain)
		require.NoError(t, err, "%q as %q", s, plain)
		assert.Zero(t, r.Cmp(back), "%q", s)
		assert.NoError(t, attrcheck.CheckNumber(r), "%q", s)
	})
}
