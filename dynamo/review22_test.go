package dynamo_test

// Failing tests from hostile review 22 (branch review22): tests only, no fixes.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemstore"
)

// TestReview22_CompleteManyOverwritesACompletionUnderItsToken: Store.CompleteMany's PartiQL
// UPDATE is conditional on the lease token only (updateStatement: WHERE key AND token),
// not on the record being in progress, as Store.Complete's is (ownedInProgressCondition).
// So a batch completion that meets a record completed under its token already writes its
// own result over the one recorded, where Complete keeps the first (storetest
// CompletionKeepsFirst, which tests Complete alone).
//
// Expected: idemstore.BatchStore says each method has "exactly the per-record semantics
// of its single-record counterpart", and Store.Complete's doc (and RELIABILITY.md: "no
// completion under a token overwrites another") that a completion meeting the record
// completed under its token writes nothing and returns nil. CompleteMany must do the same:
// nil, and the first result kept.
//
// Severity: low today. The guard sends one content per token through CompleteMany
// (OnRefused, the one path that completes a token twice with different results, is ignored
// in batches), so no path found reaches it; but the sim runs memstore, whose CompleteMany
// is Complete, and cannot see this divergence, and any future path that completes a token
// twice through a batch (or a late first attempt of a BatchExecuteStatement landing after
// another completion under the token) replaces the result a caller was already answered.
//
// IDEM_REQUIRE_DYNAMODB=1 go test -race -count=1 -run TestReview22_ ./dynamo
func TestReview22_CompleteManyOverwritesACompletionUnderItsToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := time.Now()
	const key, token = "review22.op#completemany", "0123456789abcdef0123456789abcdef"
	_, claimed, err := e.store.Claim(ctx, &idemstore.Record{
		Key: key, Status: idemstore.StatusInProgress, LeaseToken: token,
		LeaseExpires: now.Add(time.Minute), Expires: now.Add(time.Hour), Version: idemstore.SchemaVersion,
	}, now)
	require.NoError(t, err)
	require.True(t, claimed)
	done := func(data string) *idemstore.Record {
		return &idemstore.Record{Key: key, Status: idemstore.StatusCompleted, Expires: now.Add(time.Hour),
			LeaseToken: token, Data: []byte(data), Encoding: "json", Version: idemstore.SchemaVersion}
	}
	require.NoError(t, e.store.Complete(ctx, done(`"first"`), nil))

	// The single completion keeps the first result (what CompletionKeepsFirst checks).
	require.NoError(t, e.store.Complete(ctx, done(`"second"`), nil))
	rec, err := e.store.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, `"first"`, string(rec.Data), "Complete keeps the first result")

	// The batch completion must too.
	errs := e.store.CompleteMany(ctx, []*idemstore.Record{done(`"second"`)})
	require.Len(t, errs, 1)
	assert.NoError(t, errs[0], "a completion meeting the record completed under its token returns nil")
	rec, err = e.store.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, `"first"`, string(rec.Data),
		"CompleteMany overwrote the result completed under its token: it must keep the first, as Complete does")
}
