package reliability_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddblocal"
)

// The crash child is this test binary, run again with these variables set.
const (
	envCrashChild    = "IDEM_RELIABILITY_CRASH_CHILD" // the key to claim
	envCrashTable    = "IDEM_RELIABILITY_CRASH_TABLE"
	envCrashEndpoint = "IDEM_RELIABILITY_CRASH_ENDPOINT"
)

// Lease of the crash child: its handler's deadline plus the margin.
const (
	crashDeadline = 5 * time.Second // room for a loaded machine: the child claims, checkpoints and reads within it
	crashMargin   = 500 * time.Millisecond
)

// crashChild claims the key named by the environment, records a checkpoint, prints the
// lease token and the lease end, and then hangs in its handler until it is killed.
func crashChild() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "crash child:", err); return 2 }
	store, err := dynamo.New(ddblocal.NewClient(os.Getenv(envCrashEndpoint)), os.Getenv(envCrashTable))
	if err != nil {
		return fail(err)
	}
	g, err := idem.New(store, "test", idem.WithScope("crash"), idem.WithLeaseMargin(crashMargin))
	if err != nil {
		return fail(err)
	}
	// A first call opens the connection, so the lease's time goes to the handler on a
	// loaded machine.
	warm, cancelWarm := context.WithTimeout(context.Background(), 30*time.Second)
	_, err = store.Get(warm, "warm-up")
	cancelWarm()
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), crashDeadline)
	defer cancel()
	_, _, err = idem.Do(ctx, g, idem.Request{Key: os.Getenv(envCrashChild)}, func(ctx context.Context) (string, error) {
		if err := idem.Checkpoint(ctx, "charged"); err != nil {
			return "", err
		}
		id, _ := g.StoredKey(idem.Request{Key: os.Getenv(envCrashChild)})
		rec, err := store.Get(ctx, id)
		if err != nil {
			return "", err
		}
		fmt.Printf("claimed %s %d\n", rec.LeaseToken, rec.LeaseExpires.UnixMilli())
		select {} // killed here, mid-handler
	})
	return fail(err)
}

// TestCrashAndTakeover kills a process that holds a key mid-handler. Until its lease ends,
// callers get ErrInProgress; then one takes over, sees the dead owner's checkpoint and
// completes; the dead owner's late writes, made with its token, are all fenced off.
func TestCrashAndTakeover(t *testing.T) {
	t.Parallel()
	raw := ddblocal.Client(t)
	table := ddblocal.NewTable(t, raw)
	effects := counterTable(t, raw)
	const key = "order-42"

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), envCrashChild+"="+key, envCrashTable+"="+table, envCrashEndpoint+"="+ddblocal.Endpoint(t))
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the child claims and checkpoints")
	var token string
	var leaseEndMs int64
	_, err = fmt.Sscanf(strings.TrimSpace(line), "claimed %s %d", &token, &leaseEndMs)
	require.NoError(t, err)
	leaseEnd := time.UnixMilli(leaseEndMs)
	require.NoError(t, child.Process.Kill(), "kill the owner by its PID mid-handler")
	_ = child.Wait()

	store := newStore(t, raw, table)
	g, err := idem.New(store, "test", idem.WithScope("crash"))
	require.NoError(t, err)
	id, err := g.StoredKey(idem.Request{Key: key})
	require.NoError(t, err)

	var resumedFrom string
	refused := 0
	handler := func(ctx context.Context) (string, error) {
		resumedFrom = idem.LastCheckpoint(ctx)
		fenceLateWrites(t, store, id, token, effects, "during the takeover")
		if err := dynamo.Attach(ctx, addOne(effects, key)); err != nil {
			return "", err
		}
		return "shipped", nil
	}
	var got string
	for deadline := time.Now().Add(30 * time.Second); ; {
		before := time.Now()
		got, _, err = idem.Do(t.Context(), g, idem.Request{Key: key}, handler)
		if err == nil || time.Now().After(deadline) {
			break
		}
		require.ErrorIs(t, err, idem.ErrInProgress)
		assert.True(t, before.Before(leaseEnd.Add(time.Second)), "refused only while the lease runs")
		refused++
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err)
	assert.Positive(t, refused, "callers were refused while the dead owner's lease ran")
	assert.False(t, time.Now().Before(leaseEnd), "taken over only after the lease ended")
	assert.Equal(t, "shipped", got)
	assert.Equal(t, "charged", resumedFrom, "the new owner sees the dead owner's checkpoint")

	fenceLateWrites(t, store, id, token, effects, "after completion")
	rec, err := store.Get(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, idemstore.StatusCompleted, rec.Status, "the record is intact")
	assert.NotEqual(t, token, rec.LeaseToken)
	assert.Equal(t, 1, counter(t, raw, effects, key), "the business write landed once")
	got, replayed, err := idem.Do(t.Context(), g, idem.Request{Key: key}, handler)
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, "shipped", got)
}

// fenceLateWrites makes every write the dead owner could still send with its token, and
// checks each is refused with ErrLeaseLost.
func fenceLateWrites(t *testing.T, store *dynamo.Store, id, token, effects, when string) {
	t.Helper()
	ctx := t.Context()
	late := &idemstore.Record{Key: id, Status: idemstore.StatusCompleted, LeaseToken: token, Data: []byte(`"stale"`),
		Encoding: "json", Version: idemstore.SchemaVersion, Expires: time.Now().Add(time.Hour)}
	assert.ErrorIs(t, store.Complete(ctx, late, nil), idem.ErrLeaseLost, "late completion "+when)
	assert.ErrorIs(t, store.Complete(ctx, late, []any{addOne(effects, "order-42")}), idem.ErrLeaseLost, "late transactional completion "+when)
	assert.ErrorIs(t, store.SetCheckpoint(ctx, id, token, "stale", 1), idem.ErrLeaseLost, "late checkpoint "+when)
	assert.ErrorIs(t, store.Extend(ctx, id, token, time.Now().Add(time.Hour)), idem.ErrLeaseLost, "late extension "+when)
	assert.ErrorIs(t, store.Release(ctx, id, token, time.Now()), idem.ErrLeaseLost, "late release "+when)
}
