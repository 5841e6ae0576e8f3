package storetest

import (
	"context"
	"sync"
	"time"

	"github.com/idemkit/idem"
)

// Faulty wraps a store and fails the operations named in Fail with Err. The operation can
// also be made to take effect before failing (After), which is how a write whose response
// was lost looks to the caller.
type Faulty struct {
	idem.Store

	mu    sync.Mutex
	fail  map[string]error
	after map[string]bool
}

// NewFaulty wraps s.
func NewFaulty(s idem.Store) *Faulty {
	return &Faulty{Store: s, fail: map[string]error{}, after: map[string]bool{}}
}

// Fail makes op ("claim", "get", "complete", "release", "extend", "checkpoint") fail with
// err; with applied true the operation takes effect first. A nil err heals op.
func (f *Faulty) Fail(op string, err error, applied bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[op], f.after[op] = err, applied
}

func (f *Faulty) fault(op string) (error, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fail[op], f.after[op]
}

// Claim implements idem.Store.
func (f *Faulty) Claim(ctx context.Context, rec *idem.Record, now time.Time) (*idem.Record, bool, error) {
	if err, applied := f.fault("claim"); err != nil {
		if applied {
			_, _, _ = f.Store.Claim(ctx, rec, now)
		}
		return nil, false, err
	}
	return f.Store.Claim(ctx, rec, now)
}

// Get implements idem.Store.
func (f *Faulty) Get(ctx context.Context, key string) (*idem.Record, error) {
	if err, _ := f.fault("get"); err != nil {
		return nil, err
	}
	return f.Store.Get(ctx, key)
}

// Complete implements idem.Store.
func (f *Faulty) Complete(ctx context.Context, rec *idem.Record, attached []any) error {
	if err, applied := f.fault("complete"); err != nil {
		if applied {
			_ = f.Store.Complete(ctx, rec, attached)
		}
		return err
	}
	return f.Store.Complete(ctx, rec, attached)
}

// Release implements idem.Store.
func (f *Faulty) Release(ctx context.Context, key, token string) error {
	if err, applied := f.fault("release"); err != nil {
		if applied {
			_ = f.Store.Release(ctx, key, token)
		}
		return err
	}
	return f.Store.Release(ctx, key, token)
}

// Extend implements idem.Store.
func (f *Faulty) Extend(ctx context.Context, key, token string, leaseExpires time.Time) error {
	if err, _ := f.fault("extend"); err != nil {
		return err
	}
	return f.Store.Extend(ctx, key, token, leaseExpires)
}

// SetCheckpoint implements idem.Store.
func (f *Faulty) SetCheckpoint(ctx context.Context, key, token, checkpoint string) error {
	if err, _ := f.fault("checkpoint"); err != nil {
		return err
	}
	return f.Store.SetCheckpoint(ctx, key, token, checkpoint)
}
