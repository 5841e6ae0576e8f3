package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/idemkit/idem"
)

// claimAll claims the keys of the batch together ([idem.Guard.Claim]) when batch claims are
// on and the batch allows it, and sets each item's claim index. It claims nothing when no
// item could start: the claims would only be released again.
//
// The batch keeps the per-item path in two cases, where recording outcomes at the end
// would not be what the per-item path does:
//   - [Mode.RecordEach]: an item of an ordered group runs only once the one before it has
//     durably completed, so a failed completion stops the group before its next item runs.
//   - A key that two items of the batch carry with different fingerprints: the later one
//     must meet the earlier one's recorded outcome (a payload mismatch, or a run after a
//     release), which a batch records only at its end.
//
// What a batch costs is the guard's to judge: a batch with a single key to claim is claimed
// as [idem.Do] would claim it (see [idem.Guard.Claim]), since a recorded or in-flight key
// costs one round trip that way and two in a batch claim; from two keys on a batch claim
// never costs more round trips than the per-item path, redeliveries or not.
func (b *batch) claimAll(ctx context.Context) {
	if !b.e.cfg.batchClaims || b.mode.RecordEach || b.mayStart(ctx) != nil {
		return
	}
	type first struct {
		claim int
		fp    []byte
	}
	byKey := make(map[string]first, len(b.items))
	var reqs []idem.Request
	for i := range b.state {
		it, st := &b.items[i], &b.state[i]
		st.claim = -1
		if it.Err != nil {
			continue
		}
		if f, ok := byKey[it.Key]; ok {
			if !bytes.Equal(f.fp, it.Fingerprint) {
				for j := range b.state {
					b.state[j].claim = -1
				}
				return
			}
			st.claim = f.claim
			continue
		}
		st.claim = len(reqs)
		byKey[it.Key] = first{claim: st.claim, fp: it.Fingerprint}
		reqs = append(reqs, idem.Request{Key: it.Key, Fingerprint: it.Fingerprint})
	}
	b.claims = b.e.guard.Claim(ctx, reqs)
	b.claimUsed = make([]bool, len(reqs))
	for i := range b.state {
		if st := &b.state[i]; st.claim >= 0 {
			st.met = b.claims.Met(st.claim) // the record the batch's calls of the key meet
		}
	}
}

// settleWhenLate settles the batch's claims once less than the margin is left before the
// deadline, while items may still run: outcomes finished by then are recorded before the
// Lambda timeout can lose them, and claims not yet started are released. The returned stop
// ends the goroutine and waits for it; call it before the final settle.
func (b *batch) settleWhenLate(ctx context.Context) (stop func()) {
	if b.claims == nil || !b.hasDeadline {
		return func() {}
	}
	late := b.e.clock.After(max(b.deadline.Sub(b.e.clock.Now())-b.margin, 0))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-late:
			b.claims.Settle(ctx)
		case <-done:
		case <-ctx.Done():
		}
	}()
	return func() { close(done); wg.Wait() }
}

// errClaimUsed answers an item whose key's claim an earlier item of the batch used.
var errClaimUsed = fmt.Errorf("batch: the batch's claim of this key was used before the item started: %w", idem.ErrLeaseLost)

// doClaimed runs item i's handler through the batch's claim of its key. A claim is used by
// one item only: later items with its key are duplicates of it, or come after it was
// settled unstarted.
func (b *batch) doClaimed(ctx context.Context, i int, fn func(context.Context) (struct{}, error)) (bool, error) {
	c := b.state[i].claim
	if b.claimUsed[c] {
		return false, errClaimUsed
	}
	b.claimUsed[c] = true
	if b.state[i].recordNow {
		// The next item of its group must see its effects, or learn of its failure,
		// before it starts.
		_, replayed, err := idem.DoClaimedNow(ctx, b.claims, c, fn)
		return replayed, err
	}
	_, replayed, err := idem.DoClaimed(ctx, b.claims, c, fn)
	return replayed, err
}

// settle records the outcomes of the batch's claims (and releases the claims of items not
// started), and fails the items whose outcome could not be recorded: they ran, but their
// completion failed (the lease was lost or the store failed), as a per-item completion
// would have reported. A duplicate that took such an item's success shares its failure. An
// item whose attached writes panicked in Settle fails as a panicking handler does
// ([ReasonPanic]).
func (b *batch) settle(ctx context.Context) {
	if b.claims == nil {
		return
	}
	errs := b.claims.Settle(ctx)
	for i := range b.out {
		o, st := &b.out[i], &b.state[i]
		switch {
		case o.Status == StatusRan && st.claim >= 0 && errs[st.claim] != nil:
			err := errs[st.claim]
			var ap *idem.AttachPanicError
			if errors.As(err, &ap) && !storeOutsidePanic(err) {
				// An attached write panicked, and the key was released: the handler's
				// failure, as a panic in the handler (or, without a deadline, in the
				// completion, which the guard lets go on) is.
				b.fail(o, ReasonPanic, &PanicError{Value: ap.Value, Stack: ap.Stack})
				continue
			}
			b.fail(o, classify(err, nil), err)
		case o.Status == StatusDuplicate && st.dupOf >= 0 && b.out[st.dupOf].Failed():
			b.fail(o, ReasonDuplicateFailed, duplicateFailed(b.out[st.dupOf]))
		}
	}
}

// storeOutsidePanic reports whether err wraps [idem.ErrStore] other than through an
// [*idem.AttachPanicError], whose Unwrap reaches the panic's value: a write that panics
// with a store's error is still a panic, its key released.
func storeOutsidePanic(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := err.(*idem.AttachPanicError); ok { //nolint:errorlint // this node alone
		return false
	}
	if err == idem.ErrStore { //nolint:errorlint // this node alone
		return true
	}
	if x, ok := err.(interface{ Is(error) bool }); ok && x.Is(idem.ErrStore) {
		return true
	}
	switch u := err.(type) { //nolint:errorlint // walking the tree
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if storeOutsidePanic(e) {
				return true
			}
		}
		return false
	case interface{ Unwrap() error }:
		return storeOutsidePanic(u.Unwrap())
	}
	return false
}
