// Package adaptertest holds what the tests of the source adapters (sqs, kinesis,
// dynamostream, kafka, mq) share: event fixtures from testdata, the Lambda runtime's JSON
// path, golden responses, batch item failures, the context of an invocation, a guard on
// DynamoDB Local whose calls are counted, and a guard whose hooks and logs a test reads.
//
// A test binary that imports it has the flag -update, which rewrites the golden files.
package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/internal/ddbcount"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/samtables"
	"github.com/idemkit/idem/memstore"
)

var update = flag.Bool("update", false, "rewrite the expected responses in testdata/*.golden.json")

// FunctionTimeout is the deadline of the invocations the tests make: the longest Lambda
// timeout, so that no item is held back for lack of time however slow the machine. Without
// a deadline, outcomes would be recorded one by one (see idem.Batch).
const FunctionTimeout = 15 * time.Minute

// Context returns the context of an invocation of [FunctionTimeout] that has just begun,
// canceled when tb ends.
func Context(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), FunctionTimeout)
	tb.Cleanup(cancel)
	return ctx
}

// Load returns the event of testdata/name.json.
func Load[E any](tb testing.TB, name string) E {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	require.NoError(tb, err)
	var ev E
	require.NoError(tb, json.Unmarshal(raw, &ev))
	return ev
}

// Invoke sends ev through the Lambda runtime's JSON handler for handler, as Lambda would,
// under ctx, and returns the raw response and error. A ctx without a deadline gets
// [FunctionTimeout]'s.
func Invoke(tb testing.TB, ctx context.Context, handler any, ev any) ([]byte, error) {
	tb.Helper()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, FunctionTimeout)
		defer cancel()
	}
	payload, err := json.Marshal(ev)
	require.NoError(tb, err)
	return lambda.NewHandler(handler).Invoke(ctx, payload)
}

// Golden compares a response with testdata/name.golden.json, or rewrites the file under
// -update.
func Golden(tb testing.TB, name string, got []byte) {
	tb.Helper()
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		var v any
		require.NoError(tb, json.Unmarshal(got, &v))
		pretty, err := json.MarshalIndent(v, "", "  ")
		require.NoError(tb, err)
		require.NoError(tb, os.WriteFile(path, append(pretty, '\n'), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(tb, err, "run go test -update to create it")
	assert.JSONEq(tb, string(want), string(got))
}

// Failures decodes a partial batch response (SQS, Kinesis, DynamoDB Streams: the same
// JSON) into its itemIdentifiers, in order; never nil.
func Failures(tb testing.TB, raw []byte) []string {
	tb.Helper()
	var resp struct {
		BatchItemFailures []struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	require.NoError(tb, json.Unmarshal(raw, &resp))
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// CountingGuard returns a guard for operation op on a fresh idempotency table of
// DynamoDB Local, and the client that counts its calls. The calls forward without deadline
// (ddbcount.NewUnbounded): a completion call that a loaded machine makes DynamoDB Local
// answer after idem's completion bound would be resent alone, and a count would measure
// the machine. The test binary's TestMain must be ddblocal.Main.
func CountingGuard(t *testing.T, op string) (*idem.Guard, *ddbcount.API) {
	t.Helper()
	client := ddblocal.Client(t)
	table := samtables.NewTables(t, client, "IdempotencyTable")["IdempotencyTable"]
	api := ddbcount.NewUnbounded(client)
	store, err := dynamo.New(api, table)
	require.NoError(t, err)
	guard, err := idem.New(store, op)
	require.NoError(t, err)
	return guard, api
}

// Observed is a guard on a memory store whose OnBatch events and log lines (JSON) a test
// reads.
type Observed struct {
	// Guard reports its batches to the Observed.
	Guard *idem.Guard

	mu     sync.Mutex
	events []idem.BatchEvent
	lines  strings.Builder
}

// Observe returns an Observed guard for operation op.
func Observe(tb testing.TB, op string) *Observed {
	tb.Helper()
	o := &Observed{}
	hooks := idem.Hooks{OnBatch: func(_ context.Context, e idem.BatchEvent) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.events = append(o.events, e)
	}}
	logger := slog.New(slog.NewJSONHandler(lockedWriter{o}, nil))
	g, err := idem.New(memstore.New(), op, idem.WithHooks(hooks), idem.WithLogger(logger))
	require.NoError(tb, err)
	o.Guard = g
	return o
}

// lockedWriter writes to the Observed's log lines under its lock.
type lockedWriter struct{ o *Observed }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.o.mu.Lock()
	defer w.o.mu.Unlock()
	return w.o.lines.Write(p)
}

// Events returns the OnBatch events so far.
func (o *Observed) Events() []idem.BatchEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]idem.BatchEvent(nil), o.events...)
}

// Lines returns the log lines so far.
func (o *Observed) Lines() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lines.String()
}

// Items returns the IDs of e's items, and their "status/reason".
func Items(e idem.BatchEvent) (ids, statuses []string) {
	for _, it := range e.Items {
		ids, statuses = append(ids, it.ID), append(statuses, it.Status+"/"+it.Reason)
	}
	return ids, statuses
}

// NoSecret checks that neither the items of the events nor the log lines hold secret.
func (o *Observed) NoSecret(tb testing.TB, secret string) {
	tb.Helper()
	for _, e := range o.Events() {
		dump, err := json.Marshal(e.Items)
		require.NoError(tb, err)
		assert.NotContains(tb, string(dump), secret)
	}
	assert.NotContains(tb, o.Lines(), secret)
}

// Ledger applies events, JSON objects with an event_id, as a downstream system would: it
// counts the runs of each event ID (Applied) in the order they ran (Order), and fails the
// events named in Fail until [Ledger.Heal]. Apply is safe for concurrent use; read the
// fields once the handlers have returned.
type Ledger struct {
	mu      sync.Mutex
	Applied map[string]int
	Order   []string
	Fail    map[string]bool
}

// NewLedger returns a Ledger that fails the events fail names.
func NewLedger(fail ...string) *Ledger {
	l := &Ledger{Applied: map[string]int{}}
	if len(fail) > 0 {
		l.Fail = map[string]bool{}
		for _, id := range fail {
			l.Fail[id] = true
		}
	}
	return l
}

// Apply applies the event data holds, or fails it.
func (l *Ledger) Apply(data []byte) error {
	var e struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Fail[e.EventID] {
		return errors.New("downstream unavailable")
	}
	l.Applied[e.EventID]++
	l.Order = append(l.Order, e.EventID)
	return nil
}

// Heal makes the failing events succeed from now on.
func (l *Ledger) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Fail = nil
}

// OptionErrors checks an adapter's constructor newFn: each of opts, named by its option,
// fails it with an error wrapping idem.ErrInvalidOption that names the option, and so do
// a nil guard and a nil handler (the zero H). fn is a valid handler.
func OptionErrors[H, O, R any](t *testing.T, newFn func(*idem.Guard, H, ...O) (R, error), fn H, opts map[string]O) {
	t.Helper()
	g, err := idem.New(memstore.New(), "options")
	require.NoError(t, err)
	for name, opt := range opts {
		_, err := newFn(g, fn, opt)
		require.ErrorIs(t, err, idem.ErrInvalidOption, name)
		assert.Contains(t, err.Error(), name)
	}
	_, err = newFn(nil, fn)
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	var nilHandler H
	_, err = newFn(g, nilHandler)
	require.ErrorIs(t, err, idem.ErrInvalidOption)
}

// Cost counts the DynamoDB calls (DynamoDB Local, see [CountingGuard]) of a batch of n new
// records and of the same batch delivered again. newBatch makes the adapter's handler on
// guard and returns a function that processes the batch once and returns how many records
// ran and how many replayed. New, every record must run, in the calls want; delivered
// again, every record must replay in the batch's claim calls: ⌈n/25⌉ refused batch claims
// and one BatchGetItem reading back the finished records they met.
func Cost(t *testing.T, n int, want map[string]int, newBatch func(t *testing.T, guard *idem.Guard) func(context.Context) (ran, replayed int)) {
	t.Helper()
	guard, api := CountingGuard(t, "cost")
	process := newBatch(t, guard)

	ran, _ := process(Context(t))
	require.Equal(t, n, ran)
	calls := api.Take()
	t.Logf("new: %v", calls)
	assert.Equal(t, want, calls)

	_, replayed := process(Context(t))
	require.Equal(t, n, replayed)
	calls = api.Take()
	t.Logf("redelivered: %v", calls)
	assert.Equal(t, map[string]int{"BatchExecuteStatement": (n + 24) / 25, "BatchGetItem": 1}, calls)
}
