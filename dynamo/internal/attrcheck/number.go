package attrcheck

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The limits of a DynamoDB number: 38 significant digits, and a magnitude from 1E-130 up
// to 9.9999999999999999999999999999999999999E+125 (or zero). Written as the exponent of
// the most significant digit: from -130 to 125.
const (
	maxDigits   = 38
	maxExponent = 125
	minExponent = -130
)

// errNotANumber is DynamoDB's refusal of a number it cannot parse.
var errNotANumber = errors.New("a value provided cannot be converted into a number")

// ParseNumber parses s as DynamoDB parses a number, or returns the error that makes
// DynamoDB refuse it. The grammar is Java's BigDecimal(String), which DynamoDB (Local, at
// least) uses: an optional sign, decimal digits with at most one point among them (at least
// one digit), and an optional exponent (e or E, an optional sign, digits) that fits 32
// bits, as must the scale it gives; no spaces, no hexadecimal, no fractions, no NaN or
// Infinity. Digits are those of Unicode's Nd category, as Java's are. The value must have
// at most 38 significant digits and, unless it is zero, a magnitude from 1E-130 to
// 9.9999999999999999999999999999999999999E+125.
func ParseNumber(s string) (*big.Rat, error) {
	d, ok := parseDecimal(s)
	if !ok {
		return nil, fmt.Errorf("%w: %q", errNotANumber, s)
	}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("%w: %q", err, s)
	}
	return d.rat(), nil
}

// CheckNumber returns the error that makes DynamoDB refuse to store x, the result of
// arithmetic on numbers (an update's ADD, or SET a = b + c): more than 38 significant
// digits, or a magnitude out of range. x must be a finite decimal, as sums of DynamoDB
// numbers are.
func CheckNumber(x *big.Rat) error {
	if x.Sign() == 0 {
		return nil
	}
	// x = n / 10^scale, with n an integer: the scale of a sum of DynamoDB numbers is at
	// most theirs, 130 + 37.
	n := new(big.Rat).Abs(x)
	ten := big.NewRat(10, 1)
	scale := int64(0)
	for !n.IsInt() {
		if scale > 400 {
			return errors.New("DynamoDB only supports precision up to 38 digits")
		}
		n.Mul(n, ten)
		scale++
	}
	d := decimal{digits: n.Num().String(), scale: scale}
	if err := d.check(); err != nil {
		return fmt.Errorf("%w: %s", err, x.FloatString(int(scale)))
	}
	return nil
}

// decimal is a number as written: its digits (ASCII, without sign or point) and its scale,
// the number of digits after the point less the exponent, as a BigDecimal's.
type decimal struct {
	neg    bool
	digits string
	scale  int64
}

// parseDecimal parses s as Java's BigDecimal(String) does.
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	if s != "" && (s[0] == '+' || s[0] == '-') {
		d.neg = s[0] == '-'
		s = s[1:]
	}
	mant, exp, hasExp := s, "", false
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp, hasExp = s[:i], s[i+1:], true
	}
	var digits strings.Builder
	point := false
	frac := int64(0)
	for _, r := range mant {
		if r == '.' && !point {
			point = true
			continue
		}
		v, ok := digitValue(r)
		if !ok {
			return decimal{}, false
		}
		digits.WriteByte(byte('0' + v))
		if point {
			frac++
		}
	}
	if digits.Len() == 0 {
		return decimal{}, false
	}
	d.digits = digits.String()
	e := int64(0)
	if hasExp {
		var ok bool
		if e, ok = parseExponent(exp); !ok {
			return decimal{}, false
		}
	}
	d.scale = frac - e
	if d.scale > math.MaxInt32 || d.scale < math.MinInt32 {
		return decimal{}, false
	}
	return d, true
}

// parseExponent parses the exponent of a BigDecimal: an optional sign and digits, of which
// at most ten after leading zeros, with a value that fits 32 bits.
func parseExponent(s string) (int64, bool) {
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	e, n := int64(0), 0
	for _, r := range s {
		v, ok := digitValue(r)
		if !ok {
			return 0, false
		}
		if e == 0 && v == 0 {
			continue // leading zeros
		}
		if n++; n > 10 {
			return 0, false
		}
		e = e*10 + int64(v)
	}
	if neg {
		e = -e
	}
	return e, e <= math.MaxInt32 && e >= math.MinInt32
}

// digitValue returns the value of a decimal digit: an ASCII one, or another of Unicode's
// Nd category, which come in runs of ten from zero to nine.
func digitValue(r rune) (int, bool) {
	if r >= '0' && r <= '9' {
		return int(r - '0'), true
	}
	if r < utf8.RuneSelf || !unicode.Is(unicode.Nd, r) {
		return 0, false
	}
	for _, rg := range unicode.Nd.R16 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10, true
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10, true
		}
	}
	return 0, false
}

// significant returns d's digits from the first non-zero one to the last ("" for zero),
// and the exponent of the first: d's magnitude is from 10^exp up to, not including,
// 10^(exp+1).
func (d decimal) significant() (string, int64) {
	lead := strings.TrimLeft(d.digits, "0")
	sig := strings.TrimRight(lead, "0")
	if sig == "" {
		return "", 0
	}
	return sig, int64(len(lead)) - 1 - d.scale
}

// check returns the error that makes DynamoDB refuse d: too many significant digits, or a
// magnitude out of range.
func (d decimal) check() error {
	sig, exp := d.significant()
	switch {
	case sig == "":
		return nil
	case len(sig) > maxDigits:
		return errors.New("DynamoDB only supports precision up to 38 digits")
	case exp > maxExponent:
		return errors.New("number overflow: attempting to store a number with magnitude larger than supported range")
	case exp < minExponent:
		return errors.New("number underflow: attempting to store a number with magnitude smaller than supported range")
	}
	return nil
}

// rat returns d's value; d has passed check, so its exponent is bounded.
func (d decimal) rat() *big.Rat {
	sig, exp := d.significant()
	if sig == "" {
		return new(big.Rat)
	}
	n, _ := new(big.Int).SetString(sig, 10)
	if d.neg {
		n.Neg(n)
	}
	// value = sig × 10^(exp - len(sig) + 1)
	shift := exp - int64(len(sig)) + 1
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(abs(shift)), nil)
	if shift >= 0 {
		return new(big.Rat).SetInt(n.Mul(n, p))
	}
	return new(big.Rat).SetFrac(n, p)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
