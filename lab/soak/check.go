package soak

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// check reads the table after the load: raw keys absent, leases that ended without a
// completion counted; then it settles every key that was touched with one more call (no
// faults now) once the leases have ended, and checks every key completed with the result
// its callers saw, and that no key ran more often than it was leased.
func (r *run) check(ctx context.Context, client *dynamodb.Client, store idemstore.Store, table string) error {
	items, err := scan(ctx, client, table)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, item := range items {
		for _, av := range item {
			if s, ok := av.(*types.AttributeValueMemberS); ok && strings.Contains(s.Value, "soak-payment-") {
				r.violate("a raw key is stored: %q", s.Value)
			}
		}
	}
	for i := range r.keys {
		rec, err := store.Get(ctx, r.id(i))
		if err != nil {
			return err
		}
		released := rec != nil && strings.HasPrefix(rec.LeaseToken, idemstore.ReleasedToken(""))
		if rec != nil && rec.Status == idemstore.StatusInProgress && !now.Before(rec.LeaseExpires) && !released {
			r.report.ExpiredLeases++ // a lease that ran out; a release's tombstone is none
		}
	}

	time.Sleep(r.cfg.Deadline + r.cfg.LeaseMargin) // every lease of the load has ended
	for i, k := range r.keys {
		k.mu.Lock()
		touched, had := k.runs > 0 || k.claims > 0, k.result != ""
		k.mu.Unlock()
		if !touched {
			continue
		}
		r.report.KeysTouched++
		if !had {
			r.report.Settled++
		}
		r.settle(ctx, i, k)
	}
	for i, k := range r.keys {
		r.verify(ctx, store, i, k)
	}
	return nil
}

// settle calls key i until it has a result: a handler that failed is tried again.
func (r *run) settle(ctx context.Context, i int, k *keyState) {
	for attempt := 0; attempt < 5; attempt++ {
		ctx, cancel := context.WithTimeout(ctx, r.cfg.Deadline)
		got, _, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey(i)}, func(context.Context) (string, error) {
			k.mu.Lock()
			defer k.mu.Unlock()
			k.runs++
			if k.result != "" {
				r.violate("key %d: ran again in settling after its result was stored", i)
			}
			return fmt.Sprintf("key %d run %d", i, k.runs), nil
		})
		cancel()
		if err == nil {
			k.mu.Lock()
			if k.result == "" {
				k.result = got
			} else if k.result != got {
				r.violate("key %d: settled with %q, but %q before", i, got, k.result)
			}
			k.mu.Unlock()
			return
		}
	}
	r.violate("key %d: could not be settled", i)
}

// verify checks key i's record against what its callers saw.
func (r *run) verify(ctx context.Context, store idemstore.Store, i int, k *keyState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r.report.MaxRunsPerKey = max(r.report.MaxRunsPerKey, k.runs)
	r.report.Executions += k.runs
	r.report.Claims += k.claims
	if k.runs > k.claims {
		r.violate("key %d: %d runs under %d leases", i, k.runs, k.claims)
	}
	if k.runs == 0 && k.claims == 0 {
		return
	}
	rec, err := store.Get(ctx, r.id(i))
	switch {
	case err != nil:
		r.violate("key %d: %v", i, err)
	case rec == nil || rec.Status != idemstore.StatusCompleted:
		r.report.StuckKeys++
		r.violate("key %d: not completed after settling: %+v", i, rec)
	default:
		r.report.CompletedKeys++
		want := fmt.Sprintf("%q", k.result)
		if string(rec.Data) != want {
			r.violate("key %d: stored %s, callers saw %s", i, rec.Data, want)
		}
	}
}

func (r *run) id(i int) string {
	id, _ := r.guard.StoredKey(idem.Request{Key: rawKey(i)})
	return id
}

func scan(ctx context.Context, client *dynamodb.Client, table string) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	var start map[string]types.AttributeValue
	for {
		out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("soak: scan: %w", err)
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items, nil
		}
		start = out.LastEvaluatedKey
	}
}
