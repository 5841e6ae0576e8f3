// Package termtext makes values safe to print on an operator's terminal: the operations
// commands (cmd/idemctl, pgstore/cmd/idemctl-pg) print stored values with it.
package termtext

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Everything a command prints that it did not write itself (checkpoints, keys, tokens,
// encodings, table names, error messages that quote them) may hold bytes a terminal
// obeys: escape sequences that retitle the window or write the clipboard, a carriage
// return and newline that forge a line before the "yes" prompt, C1 controls, bidi
// overrides that reorder what is shown. None reaches the terminal raw.

// Display returns s as a command prints a stored or user-given value: as it is when every
// character is printable and plain (no space, quote or backslash), else Go-quoted
// (strconv.Quote), with every control character (C0, DEL, C1), format character (bidi
// overrides and isolates, zero-width and tag characters), non-ASCII space and invalid
// byte escaped. A value shown unquoted never holds a backslash, so an escape is never
// read as text, and a value shown quoted starts with a quote, which an unquoted one never
// holds.
func Display(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if r == utf8.RuneError || r == ' ' || r == '"' || r == '\\' || !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Escaped returns a message with every character strconv.Quote would escape written as
// its escape, and the rest as it is: for error messages, whose own text is ours and
// whose quoted values may not be.
func Escaped(msg string) string {
	var b strings.Builder
	for i, r := range msg {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(msg[i:]); n == 1 {
				fmt.Fprintf(&b, `\x%02x`, msg[i])
				continue
			}
			b.WriteRune(r)
		case r == ' ' || strconv.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}

// EscapeJSON rewrites each character of encoding/json's output that is neither printable
// nor a newline as a \u escape. encoding/json escapes C0 controls but leaves DEL, C1
// controls and format characters (U+202E) raw; outside strings its output is printable
// ASCII and newlines, so every such character is inside a string, where the escape means
// the same character.
func EscapeJSON(doc []byte) []byte {
	var b bytes.Buffer
	for len(doc) > 0 {
		r, n := utf8.DecodeRune(doc)
		if r == '\n' || r == ' ' || (r != utf8.RuneError && strconv.IsPrint(r)) {
			b.Write(doc[:n])
		} else if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		} else {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		doc = doc[n:]
	}
	return b.Bytes()
}
