package pgstore_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// Hostile review of 89e2589 and 79ab851 (the completion with attached writes sent in
// BEGIN's own message where pgx prepares nothing).

// r13Claim claims key under token through s and returns the record that completes it.
func r13Claim(ctx context.Context, t *testing.T, s *pgstore.Store, key, token string) *idemstore.Record {
	t.Helper()
	now := time.Now()
	rec := &idemstore.Record{Key: key, Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour),
		LeaseExpires: now.Add(time.Minute), LeaseToken: token, Version: idemstore.SchemaVersion}
	_, claimed, err := s.Claim(ctx, rec, now)
	require.NoError(t, err)
	require.True(t, claimed)
	done := *rec
	done.Status, done.LeaseExpires = idemstore.StatusCompleted, time.Time{}
	done.Data, done.Encoding = []byte(`{"n":1}`), "json"
	return &done
}

// r13Conn returns a single *pgx.Conn in QueryExecModeExec (the mode for RDS Proxy), as a
// Lambda function keeps one per execution environment; the store's DB documentation
// allows it for one goroutine.
func r13Conn(ctx context.Context, t *testing.T) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// TestReview13_SingleConnSurvivesResendAndFence: through a single *pgx.Conn in exec mode, a
// resend of a committed completion with attached writes succeeds, and a fenced owner gets
// ErrLeaseLost, as before 89e2589; but both now come from BEGIN failing, and pgx's
// Conn.BeginTx answers any failure of its BEGIN query by closing the connection for good
// (c.die()). A *pgx.Conn never reconnects, so every later call of the store on it fails:
// one fenced completion (a slow worker whose lease was taken over) or one resend leaves the
// execution environment unable to claim, complete or read any key until it is recycled.
// Before 89e2589 the completion was a statement of its own in an open transaction, whose
// "not done" answer was a row, not an error, and the connection lived on.
func TestReview13_SingleConnSurvivesResendAndFence(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("resend", func(t *testing.T) {
		conn := r13Conn(ctx, t)
		s, plain := newStore(t, conn)
		l := newLedger(t, plain)
		rec := r13Claim(ctx, t, s, "k", "tok")
		require.NoError(t, s.Complete(ctx, rec, []any{l.add("a", 1, false)}))
		require.NoError(t, s.Complete(ctx, rec, []any{l.add("a", 1, false)}), "a resend of a committed completion succeeds")
		assert.Equal(t, 1, l.balance(t, "a"))
		assert.False(t, conn.IsClosed(), "the resend closed the store's only connection")
		_, err := s.Get(ctx, "k")
		assert.NoError(t, err, "the store still works after a resend")
		_, claimed, err := s.Claim(ctx, &idemstore.Record{Key: "next", Status: idemstore.StatusInProgress,
			Expires: time.Now().Add(time.Hour), LeaseExpires: time.Now().Add(time.Minute), LeaseToken: "t2",
			Version: idemstore.SchemaVersion}, time.Now())
		assert.NoError(t, err, "the next invocation's claim")
		assert.True(t, claimed)
	})

	t.Run("fenced", func(t *testing.T) {
		conn := r13Conn(ctx, t)
		s, plain := newStore(t, conn)
		l := newLedger(t, plain)
		rec := r13Claim(ctx, t, s, "k", "tok")
		rec.LeaseToken = "taken-over"
		err := s.Complete(ctx, rec, []any{l.add("a", 1, false)})
		require.ErrorIs(t, err, idem.ErrLeaseLost)
		assert.Equal(t, 0, l.balance(t, "a"))
		assert.False(t, conn.IsClosed(), "the fenced completion closed the store's only connection")
		_, err = s.Get(ctx, "k")
		assert.NoError(t, err, "the store still works after a fenced completion")
	})
}

// TestReview13_PoolKeepsConnectionsOnDuplicates: the same cause through a pool in exec
// mode (the RDS Proxy configuration the package documentation gives): each resend of a
// committed completion and each fenced completion fails BEGIN's query, pgx closes the
// connection, and the pool dials a new one, through the proxy a new TLS and
// authentication handshake, to answer a duplicate that cost one round trip before
// 89e2589. Severity low (cost, not correctness); it fails on main (3 connections dialled
// where 1 was).
func TestReview13_PoolKeepsConnectionsOnDuplicates(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.PoolFor(t, pgtest.URL(t), func(c *pgxpool.Config) {
		c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
		c.MaxConns, c.MinConns = 1, 0
	})
	s, plain := newStore(t, pool)
	l := newLedger(t, plain)
	rec := r13Claim(ctx, t, s, "k", "tok")
	require.NoError(t, s.Complete(ctx, rec, []any{l.add("a", 1, false)}))
	require.NoError(t, s.Complete(ctx, rec, []any{l.add("a", 1, false)}), "a resend")
	fenced := r13Claim(ctx, t, s, "k2", "tok")
	fenced.LeaseToken = "taken-over"
	require.ErrorIs(t, s.Complete(ctx, fenced, []any{l.add("a", 1, false)}), idem.ErrLeaseLost)
	_, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.EqualValues(t, 1, pool.Stat().NewConnsCount(), "connections dialled: duplicates closed the pool's connection")
	assert.Equal(t, 1, l.balance(t, "a"))
}

// r13RebuildingDB is a wrapper of a pool, as an application writes one for tracing or
// metrics: it has BeginTx, and forwards the transaction options pgx had before v5 added
// BeginQuery and CommitQuery (isolation, access and deferrable modes), field by field. It
// has no Config method, so the store cannot read the pool's mode (79ab851: such a wrapper
// gets the completion sent with BEGIN, whatever the pool's mode).
type r13RebuildingDB struct {
	*pgxpool.Pool
	begins atomic.Int64
}

func (d *r13RebuildingDB) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	d.begins.Add(1)
	return d.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: opts.IsoLevel, AccessMode: opts.AccessMode, DeferrableMode: opts.DeferrableMode})
}

// r13DB hides the pool's Config method from the store: only DB and BeginTx show.
type r13DB struct {
	pgstore.DB
	b interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	}
}

func (d r13DB) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	return d.b.BeginTx(ctx, opts)
}

// r13Out is a guarded handler's result.
type r13Out struct{ N int }

// TestReview13_WrapperDroppingBeginQuery: a wrapper whose BeginTx forwards the isolation
// options but not BeginQuery (nothing in DB's documentation asks it to) over a pool in pgx's
// default mode. Before 89e2589 the store sent its completion as a statement of its own in
// the transaction, so such a wrapper lost at most the COMMIT's check; now the completion
// exists only as BeginQuery, and the store, believing BEGIN's message completed the record,
// runs the writes and commits them with the record still in progress. Complete returns nil,
// the guard returns the first result, and the retry after the lease ends claims the key
// and runs the handler again: its write commits twice.
//
// Schedule: call 1 claims (lease L = 1 min, expiry 24 h), the handler attaches +1; the store's BeginTx goes
// through the wrapper as a plain BEGIN; +1 runs; COMMIT commits it; Complete returns nil;
// the record stays INPROGRESS under call 1's token. Call 2 (a retry 10 min later): the claim
// finds the lease ended and takes the key over; the handler runs again; +1 again. Balance 2.
func TestReview13_WrapperDroppingBeginQuery(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.Pool(t)
	w := &r13RebuildingDB{Pool: pool}
	s, plain := newStore(t, r13DB{DB: pool, b: w})
	l := newLedger(t, plain)

	var offset atomic.Int64
	clock := idem.ClockFunc(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
	g, err := idem.New(s, "wrapper", idem.WithScope("test"), idem.WithClock(clock), idem.WithLease(time.Minute),
		idem.WithExpiry(24*time.Hour))
	require.NoError(t, err)
	var runs atomic.Int64
	call := func() (r13Out, error) {
		v, _, err := idem.Do(ctx, g, idem.Request{Key: "order-1"}, func(ctx context.Context) (r13Out, error) {
			runs.Add(1)
			return r13Out{N: int(runs.Load())}, pgstore.Attach(ctx, l.add("a", 1, false))
		})
		return v, err
	}
	first, err := call()
	require.NoError(t, err)
	require.Positive(t, w.begins.Load(), "the completion's transaction went through the wrapper's BeginTx")

	key, err := g.StoredKey(idem.Request{Key: "order-1"})
	require.NoError(t, err)
	rec, err := s.Get(ctx, key)
	require.NoError(t, err)
	require.NotNil(t, rec)
	assert.Equal(t, idemstore.StatusCompleted, rec.Status, "Complete returned nil, the write committed, the record must be completed")

	offset.Store(int64(10 * time.Minute)) // a retry after the lease (and its margin), before the expiry
	second, err := call()
	require.NoError(t, err)
	assert.Equal(t, first, second, "the retry gets the first result")
	assert.EqualValues(t, 1, runs.Load(), "the handler ran once")
	assert.Equal(t, 1, l.balance(t, "a"), "the attached write committed once")
}

// r13Tracer records the SQL text of every query a connection starts, as a tracing wrapper
// (otelpgx's db.statement, say) does.
type r13Tracer struct {
	mu   sync.Mutex
	text []string
}

func (r *r13Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.text = append(r.text, data.SQL)
	return ctx
}

func (r *r13Tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestReview13_ResultNotInStatementText: the handler's result is data the guard keeps
// out of its logs; its statements pass it as a parameter, which tracers record apart (and
// by default not at all). In exec mode the completion sent with BEGIN carries the
// result, hex-encoded, and the lease token in the statement text, which every pgx tracer
// records as the statement: the result (personal data, up to the size limit) lands in
// traces and logs. Low severity: no double execution, a confidentiality and volume
// regression of 89e2589.
func TestReview13_ResultNotInStatementText(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr := &r13Tracer{}
	pool := pgtest.PoolFor(t, pgtest.URL(t), func(c *pgxpool.Config) {
		c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
		c.ConnConfig.Tracer = tr
	})
	s, plain := newStore(t, pool)
	l := newLedger(t, plain)
	rec := r13Claim(ctx, t, s, "k", "tok")
	rec.Data = []byte(`{"card":"4111111111111111","name":"Jane Doe"}`)
	require.NoError(t, s.Complete(ctx, rec, []any{l.add("a", 1, false)}))
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, q := range tr.text {
		assert.NotContains(t, q, hex.EncodeToString(rec.Data), "the handler's result in a traced statement")
		assert.False(t, strings.Contains(q, string(rec.Data)), "the handler's result in a traced statement")
	}
}

// TestReview13_LiteralsUnderSessionSettings: the values inlined in the completion sent
// with BEGIN reach the record as the parameters of the default mode would, whatever the
// session says of strings, dates and time zones: standard_conforming_strings off (a
// backslash in a plain literal escapes), a time zone with a 45-minute offset. (Not DateStyle
// or bytea_output: pgx reads results as text in exec mode and parses only ISO dates and hex
// bytea, so every read of the store fails under DateStyle SQL or bytea_output escape, before
// and after 89e2589.) Keys, tokens and fingerprints carry quotes and
// backslashes in every arrangement, multibyte text, and the result every byte and 1 MiB.
// Passes on main: added coverage.
func TestReview13_LiteralsUnderSessionSettings(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.PoolFor(t, pgtest.URL(t), func(c *pgxpool.Config) {
		c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
		c.ConnConfig.RuntimeParams["standard_conforming_strings"] = "off"
		c.ConnConfig.RuntimeParams["TimeZone"] = "Pacific/Chatham"
	})
	var scs string
	require.NoError(t, pool.QueryRow(ctx, "SHOW standard_conforming_strings").Scan(&scs))
	require.Equal(t, "off", scs)
	s, plain := newStore(t, pool)
	l := newLedger(t, plain)
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	for i, v := range []string{`\`, `'`, `\'`, `''`, `\\'`, `'\`, `E'x'`, `$$`, "ü€😀", `x'); DROP TABLE ledger; --`, `\x00`, "\t\n\r"} {
		key := "k" + v + string(rune('a'+i))
		rec := r13Claim(ctx, t, s, key, "t"+v)
		rec.Fingerprint, rec.Encoding = "f"+v, "e"+v
		rec.Expires = time.Date(2031, 12, 3, 4, 5, 6, 789_123_001, time.FixedZone("x", -(9*3600+30*60)))
		rec.Data = big[:256*(i+1)]
		if i == 0 {
			rec.Data = big
		}
		require.NoError(t, s.Complete(ctx, rec, []any{l.add("a", 1, false)}), "%q", v)
		got, err := s.Get(ctx, key)
		require.NoError(t, err)
		require.NotNil(t, got, "%q", v)
		assert.Equal(t, idemstore.StatusCompleted, got.Status, "%q", v)
		assert.Equal(t, rec.LeaseToken, got.LeaseToken, "%q", v)
		assert.Equal(t, rec.Fingerprint, got.Fingerprint, "%q", v)
		assert.Equal(t, rec.Encoding, got.Encoding, "%q", v)
		assert.True(t, bytes.Equal(rec.Data, got.Data), "%q: data differs", v)
		assert.Equal(t, rec.Expires.Add(999*time.Nanosecond).Truncate(time.Microsecond).UnixMicro(), got.Expires.UnixMicro(), "%q", v)
		assert.True(t, got.LeaseExpires.IsZero())
	}
	assert.Equal(t, 12, l.balance(t, "a"))
}
