package pgstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// TestBatchStatementsScanNoTable plans each batch statement for ten records on a table of
// 3,000 records whose statistics nobody gathered (as a table that grew since its last
// ANALYZE): every record is found by its key or its row version, never by reading the
// whole table, so a batch costs the same whatever the table holds.
func TestBatchStatementsScanNoTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	table := pgtest.Name("idem")
	require.NoError(t, CreateTable(ctx, pool, table))
	s, err := New(pool, table)
	require.NoError(t, err)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	batch := func(prefix string) []*idemstore.Record {
		recs := make([]*idemstore.Record, 10)
		for i := range recs {
			recs[i] = &idemstore.Record{Key: fmt.Sprint(prefix, i), Status: idemstore.StatusInProgress,
				Expires: now.Add(time.Hour), LeaseExpires: now.Add(time.Minute), LeaseToken: "a", Version: 1}
		}
		return recs
	}
	for r := range 300 {
		for _, res := range s.ClaimMany(ctx, batch(fmt.Sprint("w", r, "-")), now) {
			require.NoError(t, res.Err)
		}
	}
	recs := batch("w7-") // taken: the claim's refusals are read back
	idx := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	keys, tokens := make([]string, 10), make([]string, 10)
	for i, r := range recs {
		keys[i], tokens[i] = r.Key, r.LeaseToken
	}
	claimArgs := func() []any {
		n := len(recs)
		ids, statuses := make([]string, n), make([]string, n)
		expires, leases := make([]*time.Time, n), make([]*time.Time, n)
		texts := make([]*string, n)
		data, versions, seqs := make([][]byte, n), make([]int32, n), make([]int64, n)
		for j, r := range recs {
			ids[j], statuses[j], expires[j], leases[j] = r.Key, string(r.Status), endPtr(r.Expires), endPtr(r.LeaseExpires)
			versions[j] = 1
		}
		tokenPtrs := make([]*string, n)
		for j := range tokenPtrs {
			tokenPtrs[j] = &tokens[j]
		}
		return []any{ids, statuses, expires, leases, texts, data, texts, tokenPtrs, texts, versions, seqs, at(now), idemstore.ReleasedToken("")}
	}
	for _, tc := range []struct {
		name string
		sql  string
		args []any
	}{
		{"claim", s.batch.claim, claimArgs()},
		{"claimLocking", s.batch.claimLocking, claimArgs()},
		{"complete", s.batch.complete, completeArrays(recs, idx)},
		{"completeOwned", s.batch.completeOwned, completeArrays(recs, idx)},
		{"release", s.batch.release, []any{keys, tokens, at(now), idemstore.ReleasedToken("")}},
	} {
		rows, err := pool.Query(ctx, "EXPLAIN "+tc.sql, tc.args...)
		require.NoError(t, err, tc.name)
		var plan []string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan = append(plan, line)
		}
		require.NoError(t, rows.Err())
		assert.NotContains(t, strings.Join(plan, "\n"), "Seq Scan on "+table, "%s reads the whole table:\n%s", tc.name, strings.Join(plan, "\n"))
	}
}
