package storetest

import (
	"context"
	"sync"
	"time"

	"github.com/idemkit/idem/idemstore"
)

// Faulty wraps a store and fails the operations named in Fail with Err. The operation can
// also be made to take effect before failing (After), which is how a write whose response
// was lost looks to the caller. It counts the calls of each operation.
type Faulty struct {
	idemstore.Store

	mu     sync.Mutex
	faults map[string]*fault
	calls  map[string]int
	resend bool
}

// fault is how an operation fails.
type fault struct {
	err     error
	applied bool
	times   int // calls left to fail; < 0: every call
}

// NewFaulty wraps s.
func NewFaulty(s idemstore.Store) *Faulty {
	return &Faulty{Store: s, faults: map[string]*fault{}, calls: map[string]int{}}
}

// Fail makes every call of op ("claim", "get", "complete", "release", "extend",
// "checkpoint") fail with err; with applied true the operation takes effect first. A nil
// err heals op.
func (f *Faulty) Fail(op string, err error, applied bool) { f.FailTimes(op, err, applied, -1) }

// FailTimes makes the next n calls of op fail as [Faulty.Fail] says; n < 0 means every
// call.
func (f *Faulty) FailTimes(op string, err error, applied bool, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[op] = &fault{err: err, applied: applied, times: n}
}

// ResendClaims makes every claim, while on, take effect, lose its answer and be sent again,
// returning the second answer: what the SDK's retryer does when the connection breaks after
// DynamoDB applied a PutItem.
func (f *Faulty) ResendClaims(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resend = on
}

// Calls returns how many calls of op were made, failed or not.
func (f *Faulty) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// fault counts a call of op and returns the error it fails with, if any, and whether it
// takes effect first.
func (f *Faulty) fault(op string) (error, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	ft := f.faults[op]
	if ft == nil || ft.err == nil || ft.times == 0 {
		return nil, false
	}
	if ft.times > 0 {
		ft.times--
	}
	return ft.err, ft.applied
}

// Claim implements idemstore.Store.
func (f *Faulty) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	if err, applied := f.fault("claim"); err != nil {
		if applied {
			_, _, _ = f.Store.Claim(ctx, rec, now)
		}
		return nil, false, err
	}
	f.mu.Lock()
	resend := f.resend
	f.mu.Unlock()
	if resend {
		if _, _, err := f.Store.Claim(ctx, rec, now); err != nil {
			return nil, false, err
		}
	}
	return f.Store.Claim(ctx, rec, now)
}

// Get implements idemstore.Store.
func (f *Faulty) Get(ctx context.Context, key string) (*idemstore.Record, error) {
	if err, _ := f.fault("get"); err != nil {
		return nil, err
	}
	return f.Store.Get(ctx, key)
}

// Complete implements idemstore.Store.
func (f *Faulty) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if err, applied := f.fault("complete"); err != nil {
		if applied {
			_ = f.Store.Complete(ctx, rec, attached)
		}
		return err
	}
	return f.Store.Complete(ctx, rec, attached)
}

// Release implements idemstore.Store.
func (f *Faulty) Release(ctx context.Context, key, token string, now time.Time) error {
	if err, applied := f.fault("release"); err != nil {
		if applied {
			_ = f.Store.Release(ctx, key, token, now)
		}
		return err
	}
	return f.Store.Release(ctx, key, token, now)
}

// Extend implements idemstore.Store.
func (f *Faulty) Extend(ctx context.Context, key, token string, leaseExpires time.Time) error {
	if err, _ := f.fault("extend"); err != nil {
		return err
	}
	return f.Store.Extend(ctx, key, token, leaseExpires)
}

// SetCheckpoint implements idemstore.Store.
func (f *Faulty) SetCheckpoint(ctx context.Context, key, token, checkpoint string, seq int64) error {
	if err, _ := f.fault("checkpoint"); err != nil {
		return err
	}
	return f.Store.SetCheckpoint(ctx, key, token, checkpoint, seq)
}
