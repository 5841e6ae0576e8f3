package termtext_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/internal/termtext"
)

func TestDisplay(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"payment_charged", "payment_charged"},
		{"crème-brûlée", "crème-brûlée"},
		{"", `""`},
		{"two words", `"two words"`},
		{`say "hi"`, `"say \"hi\""`},
		{`a\x1b`, `"a\\x1b"`},
		{"a\x1bb", `"a\x1bb"`},
		{"a\tb\r\nc", `"a\tb\r\nc"`},
		{"\x7f\u0085\u009b", `"\x7f\u0085\u009b"`},
		{"\u202e\u2066\u200b\U000e0041", `"\u202e\u2066\u200b\U000e0041"`},
		{"\xff", `"\xff"`},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, termtext.Display(tc.in), "Display(%q)", tc.in)
	}
}
