package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.complete(t, "done", map[string]string{"id": "o-1"})
	e.claim(t, "running", "11111111aaaaaaaa", e.now.Add(time.Minute), "step-1")
	e.claim(t, "ended-1", "22222222bbbbbbbb", e.now.Add(-time.Minute), "")
	e.claim(t, "ended-2", "33333333cccccccc", e.now.Add(-2*time.Minute), "step-2")
	e.claim(t, "no-lease", "44444444dddddddd", time.Time{}, "")
	// Past its expiry: counts as absent, so it is not stuck.
	expired := e.claim(t, "expired", "55555555eeeeeeee", e.now.Add(-time.Hour), "")
	expired.Expires = e.now.Add(-time.Second)
	expired.LeaseToken = "66666666ffffffff"
	_, claimed, err := e.store.Claim(context.Background(), expired, e.now)
	require.NoError(t, err)
	require.True(t, claimed)
	// Released after a failure, without a checkpoint: the tombstone holds nothing, as the
	// record a release deleted before.
	rel := e.claim(t, "released", "77777777abababab", e.now.Add(time.Minute), "")
	require.NoError(t, e.store.Release(context.Background(), rel.Key, rel.LeaseToken, e.now))
	// The key "ended-1" of another scope, and of another operation of the scope, its lease
	// ended too.
	otherKey := e.claimUnder(t, "other-fn", testOperation, "ended-1")
	cancelKey := e.claimUnder(t, testScope, "cancel-order", "ended-1")

	keys := func(raw ...string) []string {
		var out []string
		for _, k := range raw {
			out = append(out, e.key(t, k))
		}
		return out
	}
	tests := []struct {
		name  string
		args  []string
		want  []string // stored keys, in any order
		state map[string]string
	}{
		{name: "all", args: nil, want: append(keys("running", "ended-1", "ended-2", "no-lease"), otherKey, cancelKey)},
		{name: "lease ended", args: []string{"--state", "lease-ended"}, want: append(keys("ended-1", "ended-2"), otherKey, cancelKey)},
		{name: "in progress", args: []string{"--state", "in-progress"}, want: keys("running", "no-lease")},
		{name: "one scope", args: []string{"--scope", testScope, "--state", "lease-ended"}, want: append(keys("ended-1", "ended-2"), cancelKey)},
		{name: "one operation", args: []string{"--scope", testScope, "--operation", testOperation, "--state", "lease-ended"},
			want: keys("ended-1", "ended-2")},
		{name: "other scope", args: []string{"--scope", "other-fn"}, want: []string{otherKey}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &pagedScan{API: e.client}
			r := e.run(t, api, nil, false, append([]string{"list", "--json"}, tc.args...)...)
			require.Equal(t, exitOK, r.code, r.stderr)
			var out listing
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
			var got []string
			for _, v := range out.Records {
				got = append(got, v.StoredKey)
				assert.Contains(t, []string{stateLeaseRunning, stateLeaseEnded, stateHeld}, v.State)
			}
			assert.ElementsMatch(t, tc.want, got)
			assert.False(t, out.More)
			// Pages of one item: every item of the table was read, one page each, and the
			// last page says the table has ended.
			assert.Equal(t, int32(9), out.Scanned)
			assert.Equal(t, int32(10), api.pages.Load())
		})
	}
}

func TestListText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claim(t, "running", "11111111aaaaaaaa", e.now.Add(time.Minute), "step-1")
	e.claim(t, "ended", "22222222bbbbbbbb", e.now.Add(-90*time.Second), "")
	r := e.run(t, e.client, nil, false, "list")
	require.Equal(t, exitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, r.stdout)
	assert.Regexp(t, `^STATE +STORED KEY +LEASE END +OWNER +CHECKPOINT$`, lines[0])
	assert.Contains(t, r.stdout, "in-progress  "+e.key(t, "running"))
	assert.Regexp(t, `\(in 1m0s\) +11111111… +step-1\n`, r.stdout)
	assert.Contains(t, r.stdout, "lease-ended  "+e.key(t, "ended"))
	assert.Regexp(t, `\(1m30s ago\) +22222222… +none\n`, r.stdout)
	assert.Regexp(t, `^2 record\(s\); scanned 2 item\(s\)`, r.stderr)
}

func TestListLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, k := range []string{"a", "b", "c"} {
		e.claim(t, k, "tok-"+k, e.now.Add(-time.Minute), "")
	}
	api := &pagedScan{API: e.client}
	r := e.run(t, api, nil, false, "list", "--json", "--limit", "2")
	require.Equal(t, exitOK, r.code, r.stderr)
	var out listing
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	assert.Len(t, out.Records, 2)
	assert.True(t, out.More, "the table has a third record")
	assert.Equal(t, int32(2), api.pages.Load(), "the scan stops at the limit")

	r = e.run(t, e.client, nil, false, "list", "--limit", "2")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "stopped at --limit 2, more may follow")
}
