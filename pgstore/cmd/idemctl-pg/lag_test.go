package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
	"github.com/idemkit/idem/pgstore/pgoutbox"
	"github.com/idemkit/idem/pgstore/pgstoretest"
)

func TestMain(m *testing.M) { os.Exit(pgstoretest.Main(m)) }

// hostile is a broker error that would command a terminal printed raw: a window title,
// and a line forged after a carriage return.
const hostile = "refused\x1b]0;pwned\a\r\nall events published"

// env is an idempotency table and its outbox in the public schema (idemctl-pg connects on
// its own, without a test schema in its search_path), with a guard over them.
type env struct {
	url, table string
	pool       *pgxpool.Pool
	store      *pgstore.Store
	guard      *idem.Guard
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	table := pgtest.Name("idemctl")
	require.NoError(t, pgstore.CreateTable(ctx, pool, table))
	require.NoError(t, pgstore.CreateOutboxTable(ctx, pool, table+pgstore.OutboxSuffix))
	t.Cleanup(func() {
		for _, name := range []string{table, table + pgstore.OutboxSuffix} {
			_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
		}
	})
	store, err := pgstore.New(pool, table)
	require.NoError(t, err)
	g, err := idem.New(store, "orders")
	require.NoError(t, err)
	return &env{url: pgtest.URL(t), table: table, pool: pool, store: store, guard: g}
}

// produce completes key's run, recording one event of each type on orderingKey, and
// returns their ids.
func (e *env) produce(t *testing.T, key, orderingKey string, types ...string) []string {
	t.Helper()
	var ids []string
	_, _, err := idem.Do(context.Background(), e.guard, idem.Request{Key: key}, func(ctx context.Context) (string, error) {
		ids = ids[:0]
		for _, typ := range types {
			id, err := outbox.Record(ctx, outbox.Event{Destination: "orders-queue", OrderingKey: orderingKey, Type: typ})
			if err != nil {
				return "", err
			}
			ids = append(ids, id)
		}
		return "ok", nil
	})
	require.NoError(t, err)
	return ids
}

// relayOnce runs one relay pass whose publisher refuses the messages refuse names.
func (e *env) relayOnce(t *testing.T, refuse map[string]bool) {
	t.Helper()
	pub := outbox.PublisherFunc(func(_ context.Context, msgs []outbox.Message) []error {
		errs := make([]error, len(msgs))
		for i, m := range msgs {
			if refuse[m.ID] {
				errs[i] = errors.New(hostile)
			}
		}
		return errs
	})
	r, err := pgoutbox.New(e.pool, e.store.OutboxTable(), pub)
	require.NoError(t, err)
	_, err = r.RelayOnce(context.Background())
	require.NoError(t, err)
}

// run runs idemctl-pg in-process with args and the environment env.
func run(env map[string]string, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	a := &app{stdout: &out, stderr: &errOut, getenv: func(k string) string { return env[k] }, connect: connect}
	code = a.run(context.Background(), args)
	return out.String(), errOut.String(), code
}

// TestOutboxLag on real PostgreSQL: an empty outbox, then two events waiting behind a
// refused publish (the count, the lag, the oldest with its attempts and its error,
// escaped), as text and as JSON; the table and database from the environment.
func TestOutboxLag(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	outboxTable := e.table + pgstore.OutboxSuffix

	stdout, stderr, code := run(nil, "outbox", "lag", "--store", e.url, "--table", e.table)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, fmt.Sprintf("outbox        %s\nunpublished   0\nlag           0s\n", outboxTable), stdout)

	first := e.produce(t, "k-1", "acct-1", "OrderPlaced", "OrderPaid")
	e.produce(t, "k-2", "acct-2", "OrderPlaced")
	e.relayOnce(t, map[string]bool{first[0]: true})

	stdout, stderr, code = run(map[string]string{"DATABASE_URL": e.url, "IDEMPOTENCY_TABLE": e.table}, "outbox", "lag")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "unpublished   2\n")
	assert.Contains(t, stdout, "oldest        "+first[0]+"\n")
	assert.Contains(t, stdout, "  ordering key  acct-1\n")
	assert.Contains(t, stdout, "  destination   orders-queue\n")
	assert.Contains(t, stdout, "  type          OrderPlaced\n")
	assert.Contains(t, stdout, "  attempts      1\n")
	assert.Contains(t, stdout, `  last error    "refused\x1b]0;pwned\a\r\nall events published"`+"\n")
	assert.NotContains(t, stdout, "\x1b", "nothing raw reaches the terminal")
	assert.NotContains(t, stdout, "lag           0s", "the oldest event waits")

	stdout, stderr, code = run(nil, "outbox", "lag", "--json", "--store", e.url, "--table", e.table)
	require.Equal(t, exitOK, code, stderr)
	var got backlogJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &got))
	assert.Equal(t, outboxTable, got.Table)
	assert.Equal(t, int64(2), got.Unpublished)
	assert.Positive(t, got.LagMillis+1)
	require.NotNil(t, got.Oldest)
	assert.Equal(t, first[0], got.Oldest.ID)
	assert.Equal(t, 1, got.Oldest.Attempts)
	assert.Equal(t, hostile, got.Oldest.LastError, "JSON decodes to the value itself")
	assert.NotContains(t, stdout, "\x1b")
}

// TestOutboxLagRefuses: a bad command line exits 2; an unreachable database or a missing
// outbox exits 1, and never prints the password.
func TestOutboxLagRefuses(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	tests := []struct {
		name   string
		env    map[string]string
		args   []string
		code   int
		stderr string
	}{
		{"no command", nil, nil, exitUsage, "no command"},
		{"unknown command", nil, []string{"show"}, exitUsage, `unknown command "show"`},
		{"no database", nil, []string{"outbox", "lag"}, exitUsage, "name the database with --store"},
		{"not postgres", nil, []string{"outbox", "lag", "--store", "dynamodb://t"}, exitUsage, "want a postgres:// URL"},
		{"argument", nil, []string{"outbox", "lag", "--store", url, "extra"}, exitUsage, `unexpected argument "extra"`},
		{"bad flag", nil, []string{"outbox", "lag", "--limit", "3"}, exitUsage, "flag provided but not defined"},
		{"no outbox", nil, []string{"outbox", "lag", "--store", url, "--table", "no_such_table"}, exitFailed, "no_such_table_outbox"},
		{"unreachable", nil, []string{"outbox", "lag", "--store", "postgres://idem:s3cret@127.0.0.1:1/idem?connect_timeout=5"}, exitFailed, "connect"},
		{"help", nil, []string{"help"}, exitOK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := run(tc.env, tc.args...)
			assert.Equal(t, tc.code, code, stderr)
			assert.Contains(t, stderr, tc.stderr)
			assert.NotContains(t, stderr+stdout, "s3cret")
			if tc.name == "help" {
				assert.Contains(t, stdout, "idemctl-pg outbox lag")
			}
		})
	}
}

// The help and the usage stay in step with the flags.
func TestUsageNamesTheFlags(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"--store", "--table", "--json"} {
		assert.True(t, strings.Contains(usage, f), f)
	}
}
