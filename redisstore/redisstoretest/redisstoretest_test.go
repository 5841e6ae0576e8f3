package redisstoretest_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/redisstore"
	"github.com/idemkit/idem/redisstore/redisstoretest"
)

func TestMain(m *testing.M) { os.Exit(redisstoretest.Main(m)) }

// TestIsolation: two tests of one binary that use the same job id each run their handler
// and store their own result: neither replays the other's record, run one after the other
// or side by side.
func TestIsolation(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		name := "Sequential"
		if parallel {
			name = "Parallel"
		}
		t.Run(name, func(t *testing.T) {
			for _, test := range []string{"first", "second"} {
				t.Run(test, func(t *testing.T) {
					if parallel {
						t.Parallel()
					}
					guard, err := idem.New(redisstoretest.NewStore(t), "run-job")
					require.NoError(t, err)
					got, replayed, err := idem.Do(context.Background(), guard, idem.Request{Key: "job-1"},
						func(ctx context.Context) (string, error) { return test, nil })
					require.NoError(t, err)
					assert.False(t, replayed, "no other test's record is seen")
					assert.Equal(t, test, got)
				})
			}
		})
	}
}

// TestCleanup: the keys of a test's store are gone once the test ends, and a prefix given
// in the options does not replace the test's own.
func TestCleanup(t *testing.T) {
	var redisKey string
	t.Run("Inner", func(t *testing.T) {
		store := redisstoretest.NewStore(t, redisstore.WithKeyPrefix("shared:"))
		guard, err := idem.New(store, "run-job")
		require.NoError(t, err)
		_, _, err = idem.Do(context.Background(), guard, idem.Request{Key: "job-1"},
			func(ctx context.Context) (int, error) {
				redisKey = store.RedisKey(idem.StoredKey(ctx))
				return 1, nil
			})
		require.NoError(t, err)
		assert.Regexp(t, `^idemtest:[0-9a-f]{16}:`, redisKey)
		n, err := redisstoretest.Client(t).Exists(context.Background(), redisKey).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "the record is there while the test runs")
	})
	n, err := redisstoretest.Client(t).Exists(context.Background(), redisKey).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the record is deleted when the test ends")
}
