package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// Harness tells [Run] how to make the store under test. Only NewStore is required.
type Harness struct {
	// NewStore returns an empty store (or one whose keys no other test uses).
	NewStore func(t *testing.T) idemstore.Store
	// NewCounter returns a fresh business counter for store: add attaches "add n" to the
	// completion of the guarded call that ctx belongs to (with failCond, a write whose
	// condition fails), and read returns the committed total. Nil for a store that
	// supports no attached writes: the suite then skips only the attached-write tests.
	NewCounter func(t *testing.T, store idemstore.Store) (add func(ctx context.Context, n int, failCond bool) error, read func() int)
	// Contention sets the goroutines per key and keys of the race test (defaults 64 and 50).
	Goroutines, Keys int
	// Batch routes every call through an [idem.Batch] (Claim, DoClaimed, Settle) instead
	// of [idem.Do], to show the batch path keeps Do's semantics. The batch claims the
	// request's key with a second one that it never runs and releases at Settle.
	Batch bool
}

// do runs one request the way the harness says.
func do[T any](h Harness, ctx context.Context, g *idem.Guard, req idem.Request, fn func(context.Context) (T, error)) (T, bool, error) {
	if !h.Batch {
		return idem.Do(ctx, g, req, fn)
	}
	// A second key, never run: a batch with one key to claim is claimed as Do claims it
	// (idem.Guard.Claim), and the suite means the batch claim. Settle releases it.
	pad := req
	pad.Key += "/pad"
	b := g.Claim(ctx, []idem.Request{req, pad})
	v, replayed, err := idem.DoClaimed(ctx, b, 0, fn)
	if serr := b.Settle(ctx)[0]; err == nil && serr != nil {
		return v, false, serr
	}
	return v, replayed, err
}

type result struct {
	N   int    `json:"n"`
	Msg string `json:"msg"`
}

type fixture struct {
	store idemstore.Store
	clock *SettableClock
	guard *idem.Guard
}

func (h Harness) fixture(t *testing.T, opts ...idem.Option) fixture {
	t.Helper()
	s := h.NewStore(t)
	c := NewSettableClock()
	opts = append([]idem.Option{idem.WithClock(c), idem.WithScope("suite")}, opts...)
	g, err := idem.New(s, "test", opts...)
	require.NoError(t, err)
	return fixture{store: s, clock: c, guard: g}
}

func key(t *testing.T) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return t.Name() + "/" + hex.EncodeToString(b[:])
}

// Run runs the behaviour suite against the store h makes, as subtests of t. A failure
// names the guarantee the store broke.
func Run(t *testing.T, h Harness) {
	t.Run("NewThenReplay", h.newThenReplay)
	t.Run("ErrorReleases", h.errorReleases)
	t.Run("RememberedFailure", h.rememberedFailure)
	t.Run("PayloadMismatch", h.payloadMismatch)
	t.Run("InProgress", h.inProgress)
	t.Run("WaitForInFlight", h.waitForInFlight)
	t.Run("ExpiredRecordIsAbsent", h.expiredIsAbsent)
	t.Run("TakeoverFencesLateOwner", h.takeover)
	t.Run("Checkpoint", h.checkpoint)
	t.Run("CheckpointSurvivesTwoTakeovers", h.checkpointTwoTakeovers)
	t.Run("CheckpointSurvivesResentTakeover", h.checkpointResentTakeover)
	t.Run("CheckpointSurvivesHandlerFailure", h.checkpointSurvivesFailure)
	t.Run("CheckpointValueSurvivesTakeovers", h.checkpointValueTakeovers)
	t.Run("CheckpointValueSurvivesHandlerFailure", h.checkpointValueSurvivesFailure)
	t.Run("CheckpointValueBinaryCodec", h.checkpointValueBinaryCodec)
	t.Run("WaitJudgesAnotherOwnersRecord", h.waitOtherPayload)
	t.Run("ShortExpiryLongLease", h.shortExpiryLongLease)
	t.Run("Contention", h.contention)
	t.Run("LargeResults", h.largeResults)
	t.Run("IncompatibleRecord", h.incompatible)
	t.Run("StoreFailures", h.storeFailures)
	t.Run("LateExtension", h.lateExtension)
	t.Run("LateCheckpoint", h.lateCheckpoint)
	t.Run("CompletionKeepsFirst", h.completionKeepsFirst)
	t.Run("CheckpointSeqCarried", h.checkpointSeqCarried)
	t.Run("CheckpointKeptExactly", h.checkpointKeptExactly)
	t.Run("LateClaimAfterRelease", h.lateClaimAfterRelease)
	t.Run("LateClaimAfterTwoReleases", h.lateClaimAfterTwoReleases)
	t.Run("LateClaimThroughGuard", h.lateClaimThroughGuard)
	t.Run("BatchDuplicates", h.batchDuplicates)
	t.Run("TakeoverCarriesExactly", h.takeoverCarriesExactly)
	if h.NewCounter != nil {
		t.Run("TransactionalCompletion", h.transactional)
		if _, ok := h.NewStore(t).(idemstore.BatchAttachStore); ok {
			t.Run("BatchAttachedCompletion", h.batchAttached)
		}
	}
}

func storedRecord(t *testing.T, f fixture, k string) *idemstore.Record {
	t.Helper()
	rec, err := f.store.Get(context.Background(), storedKey(t, f.guard, k))
	require.NoError(t, err)
	require.NotNil(t, rec)
	return rec
}

// randomText returns n bytes of printable, incompressible text.
func randomText(n int) string {
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

func storedKey(t *testing.T, g *idem.Guard, k string) string {
	t.Helper()
	sk, err := g.StoredKey(idem.Request{Key: k})
	require.NoError(t, err)
	return sk
}
