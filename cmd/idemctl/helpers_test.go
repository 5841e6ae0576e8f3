package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddblocal"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// The SDK client must keep satisfying the interface idemctl declares.
var _ API = (*dynamodb.Client)(nil)

// The scope and operation the tests guard their keys under.
const (
	testScope     = "orders-api"
	testOperation = "create-order"
)

// env is one test's idempotency table on DynamoDB Local, with a store and a guard over it.
type env struct {
	client *dynamodb.Client
	table  string
	store  *dynamo.Store
	guard  *idem.Guard
	now    time.Time // what idemctl's clock reads
}

// newEnv creates a table. TTL is off: DynamoDB Local would delete the expired records the
// tests need to linger, as they do in AWS.
func newEnv(t *testing.T) *env {
	t.Helper()
	client := ddblocal.Client(t)
	table := ddblocal.NewTable(t, client)
	ddblocal.DisableTTL(t, client, table)
	store, err := dynamo.New(client, table)
	require.NoError(t, err)
	guard, err := idem.New(store, testOperation, idem.WithScope(testScope), idem.WithExpiry(time.Hour))
	require.NoError(t, err)
	return &env{client: client, table: table, store: store, guard: guard, now: time.Now()}
}

// key returns the stored key of a raw key under testScope and testOperation.
func (e *env) key(t *testing.T, raw string) string {
	t.Helper()
	sk, err := e.guard.StoredKey(idem.Request{Key: raw})
	require.NoError(t, err)
	return sk
}

// complete runs a guarded call of raw to completion, storing result.
func (e *env) complete(t *testing.T, raw string, result map[string]string) {
	t.Helper()
	_, _, err := idem.Do(context.Background(), e.guard, idem.Request{Key: raw, Fingerprint: []byte("body")},
		func(context.Context) (map[string]string, error) { return result, nil })
	require.NoError(t, err)
}

// claim writes an in-progress record of raw, as an owner that then died would leave it:
// its lease ends at leaseEnd (none when zero), and it has checkpoint if not empty.
func (e *env) claim(t *testing.T, raw, token string, leaseEnd time.Time, checkpoint string) *idemstore.Record {
	t.Helper()
	rec := &idemstore.Record{
		Key:          e.key(t, raw),
		Status:       idemstore.StatusInProgress,
		LeaseToken:   token,
		LeaseExpires: leaseEnd,
		Expires:      e.now.Add(time.Hour),
		Fingerprint:  "f00dfeedf00dfeedf00dfeed",
		Version:      idemstore.SchemaVersion,
	}
	_, claimed, err := e.store.Claim(context.Background(), rec, e.now.Add(-time.Hour))
	require.NoError(t, err)
	require.True(t, claimed)
	if checkpoint != "" {
		require.NoError(t, e.store.SetCheckpoint(context.Background(), rec.Key, token, checkpoint, 1))
	}
	return rec
}

// claimUnder writes an in-progress record, its lease ended a minute ago, for raw under
// another scope or operation than the tests', and returns its stored key.
func (e *env) claimUnder(t *testing.T, scope, operation, raw string) string {
	t.Helper()
	g, err := idem.New(e.store, operation, idem.WithScope(scope))
	require.NoError(t, err)
	key, err := g.StoredKey(idem.Request{Key: raw})
	require.NoError(t, err)
	_, claimed, err := e.store.Claim(context.Background(), &idemstore.Record{Key: key, Status: idemstore.StatusInProgress,
		LeaseToken: "0ther" + operation, LeaseExpires: e.now.Add(-time.Minute), Expires: e.now.Add(time.Hour),
		Version: idemstore.SchemaVersion}, e.now)
	require.NoError(t, err)
	require.True(t, claimed)
	return key
}

// get reads the record of raw, nil if there is none.
func (e *env) get(t *testing.T, raw string) *idemstore.Record {
	t.Helper()
	rec, err := e.store.Get(context.Background(), e.key(t, raw))
	require.NoError(t, err)
	return rec
}

// outcome is one run of idemctl.
type outcome struct {
	code           int
	stdout, stderr string
}

// run runs idemctl in process against the test's table with args, stdin and a terminal
// or not.
func (e *env) run(t *testing.T, api API, stdin io.Reader, tty bool, args ...string) outcome {
	t.Helper()
	var stdout bytes.Buffer
	o := e.runTo(t, api, stdin, tty, &stdout, args...)
	o.stdout = stdout.String()
	return o
}

// runTo runs idemctl as run does, with its standard output going to stdout.
func (e *env) runTo(t *testing.T, api API, stdin io.Reader, tty bool, stdout io.Writer, args ...string) outcome {
	t.Helper()
	var stderr bytes.Buffer
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	a := &app{
		stdin:  stdin,
		stdout: stdout,
		stderr: &stderr,
		getenv: func(name string) string {
			if name == "IDEMPOTENCY_TABLE" {
				return e.table
			}
			return ""
		},
		now:     func() time.Time { return e.now },
		isTTY:   func() bool { return tty },
		connect: func(context.Context, string) (API, error) { return api, nil },
	}
	code := a.run(context.Background(), args)
	return outcome{code: code, stderr: stderr.String()}
}

// pagedScan makes every Scan page hold at most one item, so that a small table takes
// many pages, and counts the pages.
type pagedScan struct {
	API
	pages atomic.Int32
}

func (p *pagedScan) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	p.pages.Add(1)
	one := *in
	one.Limit = new(int32)
	*one.Limit = 1
	return p.API.Scan(ctx, &one, optFns...)
}

// typing is a terminal on which, when idemctl asks, before is done first (another writer
// racing the operator) and then line is typed.
type typing struct {
	before func()
	line   string
	r      io.Reader
}

func (ty *typing) Read(p []byte) (int, error) {
	if ty.r == nil {
		if ty.before != nil {
			ty.before()
		}
		ty.r = strings.NewReader(ty.line)
	}
	return ty.r.Read(p)
}

// incompressible returns n bytes of printable text that gzip does not shrink, for results
// too large for a record's item.
func incompressible(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	x := uint64(88172645463325252)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = alphabet[x%uint64(len(alphabet))]
	}
	return string(b)
}
