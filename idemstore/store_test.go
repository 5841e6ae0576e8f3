package idemstore_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/idemstore"
)

// TestReleasedToken: the token a release leaves is never the releasing owner's token, so
// every write conditional on that token fails afterwards; it carries the "released:"
// prefix; and two owners' tokens never release to the same value.
func TestReleasedToken(t *testing.T) {
	t.Parallel()
	tokens := []string{"", "a", "b", "3f9c2e71d4a8b605", "released:a"}
	seen := map[string]string{}
	for _, token := range tokens {
		t.Run(token, func(t *testing.T) {
			got := idemstore.ReleasedToken(token)
			assert.NotEqual(t, token, got, "the releasing owner's token no longer matches")
			assert.True(t, strings.HasPrefix(got, "released:"), "recognisable in the table: %q", got)
			if prev, ok := seen[got]; ok {
				t.Errorf("ReleasedToken(%q) = ReleasedToken(%q) = %q", token, prev, got)
			}
			seen[got] = token
		})
	}
}

// TestRecordReleased: a record is a tombstone exactly when its token is a released one.
func TestRecordReleased(t *testing.T) {
	t.Parallel()
	var none *idemstore.Record
	assert.False(t, none.Released(), "no record")
	assert.False(t, (&idemstore.Record{LeaseToken: "a"}).Released(), "an owner's record")
	assert.False(t, (&idemstore.Record{}).Released(), "a record without a token")
	assert.True(t, (&idemstore.Record{LeaseToken: idemstore.ReleasedToken("a")}).Released())
	assert.True(t, (&idemstore.Record{LeaseToken: idemstore.ReleasedToken("")}).Released())
}
