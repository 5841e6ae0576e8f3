package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

const deadToken = "deadbeefdeadbeefdeadbeefdeadbeef"

// TestReleaseTakeover releases a dead owner's running lease; the next request takes the key
// over at once and resumes from the checkpoint.
func TestReleaseTakeover(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.now = time.Now()
	e.claim(t, "order-1", deadToken, e.now.Add(10*time.Minute), "payment_charged")

	r := e.run(t, e.client, nil, false, "release", "--yes", "--scope", testScope, "--operation", testOperation, "--key", "order-1")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "owner token  deadbeef…")
	assert.Contains(t, r.stderr, "The owner's lease is still running")
	assert.Contains(t, r.stdout, `Released: the next request with this key takes it over and resumes from checkpoint "payment_charged".`)

	rec := e.get(t, "order-1")
	require.NotNil(t, rec)
	assert.Equal(t, idemstore.StatusInProgress, rec.Status)
	assert.Equal(t, idemstore.ReleasedToken(deadToken), rec.LeaseToken, "the owner's token is replaced, as the guard's own release does")
	assert.Equal(t, "payment_charged", rec.Checkpoint, "the checkpoint stays")
	assert.Equal(t, e.now.Truncate(time.Millisecond).UTC(), rec.LeaseExpires, "the lease ends at release")

	// The retry: taken over without waiting for the old lease, resuming at the checkpoint.
	runs := 0
	got, replayed, err := idem.Do(context.Background(), e.guard, idem.Request{Key: "order-1"},
		func(ctx context.Context) (string, error) {
			runs++
			return "resumed after " + idem.LastCheckpoint(ctx), nil
		})
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, 1, runs)
	assert.Equal(t, "resumed after payment_charged", got)
}

// TestReleaseFencesTheOwner releases a hung owner's lease: its next heartbeat, checkpoint
// or completion (conditional on its token) is refused with ErrLeaseLost, so it can neither
// take the lease back nor overwrite the record the next request takes over.
func TestReleaseFencesTheOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name  string
		write func(e *env, key string) error
	}{
		{"heartbeat", func(e *env, key string) error {
			return e.store.Extend(ctx, key, deadToken, e.now.Add(10*time.Minute))
		}},
		{"checkpoint", func(e *env, key string) error {
			return e.store.SetCheckpoint(ctx, key, deadToken, "shipped", 2)
		}},
		{"completion", func(e *env, key string) error {
			return e.store.Complete(ctx, &idemstore.Record{Key: key, Status: idemstore.StatusCompleted, LeaseToken: deadToken,
				Expires: e.now.Add(time.Hour), Data: []byte(`"late"`), Encoding: "json", Version: idemstore.SchemaVersion}, nil)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.claim(t, "k", deadToken, e.now.Add(5*time.Minute), "charged")
			r := e.run(t, e.client, nil, false, "release", "--yes", "--scope", testScope, "--operation", testOperation, "--key", "k")
			require.Equal(t, exitOK, r.code, r.stderr)
			before := e.get(t, "k")
			require.NotNil(t, before)

			err := tc.write(e, e.key(t, "k"))
			require.ErrorIs(t, err, idemstore.ErrLeaseLost, "the released owner's %s is fenced off", tc.name)
			assert.Equal(t, before, e.get(t, "k"), "the record is as the release left it")
		})
	}
}

// TestChangeConditional changes the record between what idemctl showed and the
// confirmation typed on the terminal: the change is refused and nothing is written.
func TestChangeConditional(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name   string
		action string
		setup  func(t *testing.T, e *env)
		race   func(t *testing.T, e *env) // another writer, after the record was shown
		want   func(t *testing.T, e *env, rec *idemstore.Record)
	}{
		{
			name: "release: owner heartbeat", action: "release",
			setup: func(t *testing.T, e *env) { e.claim(t, "k", deadToken, e.now.Add(time.Minute), "") },
			race: func(t *testing.T, e *env) {
				require.NoError(t, e.store.Extend(ctx, e.key(t, "k"), deadToken, e.now.Add(5*time.Minute)))
			},
			want: func(t *testing.T, e *env, rec *idemstore.Record) {
				assert.Equal(t, e.now.Add(5*time.Minute).Add(time.Millisecond-1).Truncate(time.Millisecond).UTC(), rec.LeaseExpires, "the store writes an end rounded up")
			},
		},
		{
			name: "release: owner checkpoint", action: "release",
			setup: func(t *testing.T, e *env) { e.claim(t, "k", deadToken, e.now.Add(time.Minute), "one") },
			race: func(t *testing.T, e *env) {
				require.NoError(t, e.store.SetCheckpoint(ctx, e.key(t, "k"), deadToken, "two", 2))
			},
			want: func(t *testing.T, _ *env, rec *idemstore.Record) { assert.Equal(t, "two", rec.Checkpoint) },
		},
		{
			name: "release: owner completed", action: "release",
			setup: func(t *testing.T, e *env) { e.claim(t, "k", deadToken, e.now.Add(time.Minute), "") },
			race: func(t *testing.T, e *env) {
				require.NoError(t, e.store.Complete(ctx, &idemstore.Record{Key: e.key(t, "k"), Status: idemstore.StatusCompleted,
					LeaseToken: deadToken, Expires: e.now.Add(time.Hour), Data: []byte(`"ok"`), Encoding: "json", Version: 1}, nil))
			},
			want: func(t *testing.T, _ *env, rec *idemstore.Record) {
				assert.Equal(t, idemstore.StatusCompleted, rec.Status)
			},
		},
		{
			name: "release: taken over by a new owner", action: "release",
			setup: func(t *testing.T, e *env) { e.claim(t, "k", deadToken, e.now.Add(time.Minute), "") },
			race: func(t *testing.T, e *env) {
				// Another operator released it, and a new request claimed it.
				require.NoError(t, e.store.Release(ctx, e.key(t, "k"), deadToken, e.now))
				_, claimed, err := e.store.Claim(ctx, &idemstore.Record{Key: e.key(t, "k"), Status: idemstore.StatusInProgress,
					LeaseToken: "new-owner", LeaseExpires: e.now.Add(time.Minute), Expires: e.now.Add(time.Hour), Version: 1}, e.now)
				require.NoError(t, err)
				require.True(t, claimed)
			},
			want: func(t *testing.T, _ *env, rec *idemstore.Record) { assert.Equal(t, "new-owner", rec.LeaseToken) },
		},
		{
			name: "delete: record replaced by a new run", action: "delete",
			setup: func(t *testing.T, e *env) { e.complete(t, "k", map[string]string{"id": "first"}) },
			race: func(t *testing.T, e *env) {
				// Someone else deleted it, and a new request ran and completed it again.
				_, err := e.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(e.table),
					Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: e.key(t, "k")}}})
				require.NoError(t, err)
				e.complete(t, "k", map[string]string{"id": "second"})
			},
			want: func(t *testing.T, _ *env, rec *idemstore.Record) { assert.Contains(t, string(rec.Data), "second") },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			tc.setup(t, e)
			term := &typing{before: func() { tc.race(t, e) }, line: "yes\n"}
			r := e.run(t, e.client, term, true, tc.action, "--scope", testScope, "--operation", testOperation, "--key", "k")
			assert.Equal(t, exitRefused, r.code, r.stderr)
			assert.Contains(t, r.stderr, "the record changed since it was shown; nothing was written")
			assert.Contains(t, r.stderr, "Type yes to "+tc.action+" this record: ")
			rec := e.get(t, "k")
			require.NotNil(t, rec, "the record is still there")
			tc.want(t, e, rec)
		})
	}
}

// TestDelete deletes a completed record: the next request runs the handler again. A result
// too large for the record's item is kept in an item of its own: the delete still deletes
// the record (and leaves that item to expire by TTL).
func TestDelete(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		result map[string]string
	}{
		{"small result", map[string]string{"id": "first"}},
		{"result kept apart", map[string]string{"id": "first", "lines": incompressible(20 << 10)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.complete(t, "order-1", tc.result)
			r := e.run(t, e.client, &typing{line: "yes\n"}, true, "delete", "--scope", testScope, "--operation", testOperation, "--key", "order-1")
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Contains(t, r.stdout, "status       COMPLETED")
			assert.Contains(t, r.stderr, "idem.WithCache")
			assert.Contains(t, r.stdout, "Deleted: the next request with this key runs the handler again.")
			assert.Nil(t, e.get(t, "order-1"))

			runs := 0
			got, replayed, err := idem.Do(context.Background(), e.guard, idem.Request{Key: "order-1", Fingerprint: []byte("body")},
				func(context.Context) (map[string]string, error) {
					runs++
					return map[string]string{"id": "second"}, nil
				})
			require.NoError(t, err)
			assert.False(t, replayed)
			assert.Equal(t, 1, runs)
			assert.Equal(t, "second", got["id"])
		})
	}
}

// TestChangeRefused covers the changes idemctl will not make; the record stays as it was.
func TestChangeRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.complete(t, "done", map[string]string{"id": "o-1"})
	e.claim(t, "running", deadToken, e.now.Add(time.Minute), "")
	e.claim(t, "ended", deadToken, e.now.Add(-time.Minute), "")
	expired := e.claim(t, "expired", "e1", e.now.Add(-2*time.Hour), "")
	expired.Expires, expired.LeaseToken = e.now.Add(-time.Minute), "e2"
	_, claimed, err := e.store.Claim(context.Background(), expired, e.now)
	require.NoError(t, err)
	require.True(t, claimed)

	tests := []struct {
		name  string
		stdin string
		tty   bool
		args  []string
		code  int
		msg   string
	}{
		{name: "no terminal, no --yes", args: []string{"release", "--key", "running"},
			code: exitUsage, msg: "release changes the table: pass --yes, or run it on a terminal to confirm"},
		{name: "not confirmed", tty: true, stdin: "y\n", args: []string{"release", "--key", "running"},
			code: exitRefused, msg: "not confirmed; nothing was written"},
		{name: "terminal closed", tty: true, args: []string{"delete", "--key", "done"},
			code: exitRefused, msg: "not confirmed (EOF); nothing was written"},
		{name: "release a completed record", args: []string{"release", "--yes", "--key", "done"},
			code: exitRefused, msg: "release ends the lease of an in-progress record; this one is COMPLETED"},
		{name: "delete an in-progress record", args: []string{"delete", "--yes", "--key", "running"},
			code: exitRefused, msg: "the record is in progress; release a dead owner's lease instead"},
		{name: "lease already ended", args: []string{"release", "--yes", "--key", "ended"},
			code: exitRefused, msg: "the lease has already ended: the next request with the key takes it over, nothing to release"},
		{name: "another owner token", args: []string{"release", "--yes", "--key", "running", "--token", "0badc0de"},
			code: exitRefused, msg: "the owner token is deadbeef…, not 0badc0de…"},
		{name: "expired", args: []string{"delete", "--yes", "--key", "expired"},
			code: exitRefused, msg: "the record has expired and already counts as absent"},
		{name: "no record", args: []string{"delete", "--yes", "--key", "nothing"},
			code: exitNotFound, msg: "no record under " + e.key(t, "nothing")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := map[string]*idemstore.Record{}
			for _, k := range []string{"done", "running", "ended", "expired"} {
				before[k] = e.get(t, k)
			}
			args := append(tc.args, "--scope", testScope, "--operation", testOperation)
			r := e.run(t, e.client, &typing{line: tc.stdin}, tc.tty, args...)
			assert.Equal(t, tc.code, r.code, r.stderr)
			assert.Contains(t, r.stderr, tc.msg)
			for k, rec := range before {
				assert.Equal(t, rec, e.get(t, k), "%s unchanged", k)
			}
		})
	}
}

// TestChangeJSON releases with --json: the record shown goes to stderr, the result to
// stdout.
func TestChangeJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claim(t, "k", deadToken, e.now.Add(time.Minute), "cp")
	r := e.run(t, e.client, nil, false, "release", "--yes", "--json", "--stored-key", e.key(t, "k"))
	require.Equal(t, exitOK, r.code, r.stderr)
	var out changed
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	assert.Equal(t, "release", out.Action)
	assert.True(t, out.Done)
	assert.Equal(t, stateLeaseRunning, out.Record.State, "the record as shown, before the release")
	assert.Equal(t, "cp", out.Record.Checkpoint)
	assert.Contains(t, r.stderr, "owner token  deadbeef…")
}
