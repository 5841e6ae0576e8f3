package httpsem

import "strings"

// checkParameters reports whether s is a valid list of RFC 8941 parameters (section 3.1.2):
// zero or more of ";" *SP key [ "=" bare-item ], and nothing after them. The key's header
// is an sf-string Item, which may carry parameters; the key is the string alone, so they
// are only checked, never read.
func checkParameters(s string) bool {
	for s != "" {
		if s[0] != ';' {
			return false
		}
		s = strings.TrimLeft(s[1:], " ")
		n := paramKeyLen(s)
		if n == 0 {
			return false
		}
		s = s[n:]
		if s == "" || s[0] != '=' {
			continue // a parameter without a value is true
		}
		n = bareItemLen(s[1:])
		if n == 0 {
			return false
		}
		s = s[1+n:]
	}
	return true
}

// paramKeyLen returns the length of the key at the start of s, or 0 when there is none:
// key = ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" ).
func paramKeyLen(s string) int {
	if s == "" || !(isLower(s[0]) || s[0] == '*') {
		return 0
	}
	i := 1
	for i < len(s) && (isLower(s[i]) || isDigit(s[i]) || strings.IndexByte("_-.*", s[i]) >= 0) {
		i++
	}
	return i
}

// bareItemLen returns the length of the bare item at the start of s, or 0 when there is
// none: an integer or decimal, a string, a token, a byte sequence or a boolean (RFC 8941,
// section 3.3).
func bareItemLen(s string) int {
	switch {
	case s == "":
		return 0
	case s[0] == '-' || isDigit(s[0]):
		return numberLen(s)
	case s[0] == '"':
		return stringLen(s)
	case isAlpha(s[0]) || s[0] == '*':
		i := 1
		for i < len(s) && (isTChar(s[i]) || s[i] == ':' || s[i] == '/') {
			i++
		}
		return i
	case s[0] == ':':
		for i := 1; i < len(s); i++ {
			switch c := s[i]; {
			case c == ':':
				return i + 1
			case !(isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '='):
				return 0
			}
		}
		return 0
	case s[0] == '?':
		if len(s) >= 2 && (s[1] == '0' || s[1] == '1') {
			return 2
		}
	}
	return 0
}

// numberLen returns the length of the integer or decimal at the start of s, or 0:
// an integer has at most 15 digits, a decimal at most 12 before its point and 1 to 3
// after it, each with an optional leading minus.
func numberLen(s string) int {
	i := 0
	if s[0] == '-' {
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	whole := i - start
	if whole == 0 {
		return 0
	}
	if i == len(s) || s[i] != '.' {
		if whole > 15 {
			return 0
		}
		return i
	}
	i++
	frac := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if whole > 12 || i-frac < 1 || i-frac > 3 {
		return 0
	}
	return i
}

// stringLen returns the length of the sf-string at the start of s, quotes included, or 0:
// printable ASCII, with '"' and '\' escaped by a backslash.
func stringLen(s string) int {
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return 0
			}
		case c == '"':
			return i + 1
		case !printable(c):
			return 0
		}
	}
	return 0
}

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isTChar reports whether c may appear in an HTTP token (RFC 9110, section 5.6.2).
func isTChar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
