package pgoutbox

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// TestErrorText: a publish error's text is stored as valid UTF-8 without NUL, bounded.
func TestErrorText(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "refused \uFFFD\uFFFD", errorText(errors.New("refused \xff\x00")))
	long := errorText(errors.New(strings.Repeat("é", maxErrorText)))
	assert.LessOrEqual(t, len(long), maxErrorText)
	assert.True(t, utf8.ValidString(long), "cut at a character's boundary")
}
