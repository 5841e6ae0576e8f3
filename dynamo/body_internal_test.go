package dynamo

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemstore"
)

// TestInlineSize checks the reckoning that decides whether a result stays inline against
// the item encodeRecord builds: never less than DynamoDB's count of it, at most a few bytes
// more (numbers are reckoned at their largest).
func TestInlineSize(t *testing.T) {
	t.Parallel()
	now := time.Unix(1772370000, 123456789)
	full := &idemstore.Record{
		Key: "orders.create#" + strings.Repeat("9f", 32), Status: idemstore.StatusCompleted,
		Expires: now.Add(time.Hour), LeaseExpires: now.Add(time.Minute), Fingerprint: strings.Repeat("ab", 32),
		Data: []byte(`{"id":"o-1"}`), Encoding: "json+gzip", LeaseToken: strings.Repeat("cd", 16),
		Checkpoint: "charged", CheckpointSeq: 3, Version: idemstore.SchemaVersion,
	}
	bare := &idemstore.Record{Key: "k", Status: idemstore.StatusInProgress}
	stores := map[string][]Option{
		"Default":   nil,
		"Renamed":   {WithAttributes(Attributes{ID: "pk", Data: "body", Status: "idem.status"})},
		"SortKey":   {WithSortKey("sk", "idempotency#orders")},
		"EmptyData": nil,
	}
	for name, opts := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := testStore(t, opts...)
			for _, rec := range []*idemstore.Record{full, bare} {
				r := *rec
				if name == "EmptyData" {
					r.Data = []byte{}
				}
				exact := itemSize(s.encodeRecord(&r))
				got := s.inlineSize(&r)
				assert.GreaterOrEqual(t, got, exact, "never less than the item's size")
				assert.LessOrEqual(t, got, exact+3*maxNumberSize, "at most a few bytes more")
			}
		})
	}
	require.Equal(t, 2, apartVersion, "schema version 2 marks a record whose result is apart")
}
