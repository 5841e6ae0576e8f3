package reliability_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/internal/ddbfault"
	"github.com/idemkit/idem/internal/ddblocal"
)

// newProxy starts a proxy in front of the test binary's DynamoDB Local and returns it
// with an SDK client (default retryer: 3 attempts) that goes through it.
func newProxy(t *testing.T) (*ddbfault.Proxy, *dynamodb.Client) {
	t.Helper()
	endpoint := ddblocal.Endpoint(t)
	p, err := ddbfault.NewProxy(strings.TrimPrefix(endpoint, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p, ddblocal.NewClient(p.URL())
}

// TestProxyFaultsUseSDKRetries breaks connections between the SDK and DynamoDB Local, so
// that the SDK's standard retryer resends requests, some of which already took effect.
func TestProxyFaultsUseSDKRetries(t *testing.T) {
	t.Parallel()
	raw := ddblocal.Client(t)
	table := ddblocal.NewTable(t, raw)
	effects := counterTable(t, raw)

	tests := []struct {
		name    string
		rules   []ddbfault.Rule
		failing bool   // the handler fails on its first run
		attach  bool   // the handler attaches its business write
		first   string // outcome of the first call
		runs    int    // handler runs after the first call
	}{
		// The resent PutItem meets the record its first attempt wrote, with our token.
		{name: "claim response cut", rules: []ddbfault.Rule{{Op: "PutItem", Action: ddbfault.Cut, Times: 1}}, first: result, runs: 1},
		{name: "claim dropped twice", rules: []ddbfault.Rule{{Op: "PutItem", Action: ddbfault.Drop, Times: 2}}, first: result, runs: 1},
		{name: "claim dropped always", rules: []ddbfault.Rule{{Op: "PutItem", Action: ddbfault.Drop, Times: -1}}, first: storeError, runs: 0},
		// The resent completion is conditional on the token, which the completed record
		// keeps: it applies again, with the same values.
		{name: "completion response cut", rules: []ddbfault.Rule{{Op: "UpdateItem", Action: ddbfault.Cut, Times: 1}}, first: result, runs: 1},
		{name: "completion dropped twice", rules: []ddbfault.Rule{{Op: "UpdateItem", Action: ddbfault.Drop, Times: 2}}, first: result, runs: 1},
		// The resent transaction carries the SDK's ClientRequestToken, so DynamoDB does not
		// apply the attached ADD twice.
		{name: "transaction response cut", attach: true, rules: []ddbfault.Rule{{Op: "TransactWriteItems", Action: ddbfault.Cut, Times: 1}}, first: result, runs: 1},
		{name: "transaction response cut twice", attach: true, rules: []ddbfault.Rule{{Op: "TransactWriteItems", Action: ddbfault.Cut, Times: 2}}, first: result, runs: 1},
		// The resent release meets the tombstone its first attempt left, whose token is no
		// longer ours (ErrLeaseLost, to the hooks only): the caller still gets its error.
		{name: "release response cut", failing: true, rules: []ddbfault.Rule{{Op: "UpdateItem", Action: ddbfault.Cut, Times: 1}}, first: handlerErr, runs: 1},
		{name: "every call cut once", attach: true, rules: []ddbfault.Rule{
			{Op: "PutItem", Action: ddbfault.Cut, Times: 1},
			{Op: "TransactWriteItems", Action: ddbfault.Cut, Times: 1},
			{Op: "GetItem", Action: ddbfault.Cut, Times: 1},
		}, first: result, runs: 1},
		{name: "slow responses", rules: []ddbfault.Rule{{Action: ddbfault.Delay, Delay: 50 * time.Millisecond, Times: -1}}, first: result, runs: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, client := newProxy(t)
			g, err := idem.New(newStore(t, client, table), "test", idem.WithScope("proxy"))
			require.NoError(t, err)
			key := "proxy-" + tc.name
			var runs atomic.Int32
			handler := func(ctx context.Context) (string, error) {
				if runs.Add(1) == 1 && tc.failing {
					return "", errBoom
				}
				if tc.attach {
					if err := dynamo.Attach(ctx, addOne(effects, key)); err != nil {
						return "", err
					}
				}
				return "r:" + key, nil
			}
			for _, r := range tc.rules {
				p.Add(r)
			}
			got, _, err := idem.Do(t.Context(), g, idem.Request{Key: key}, handler)
			assertOutcome(t, tc.first, key, got, err)
			assert.EqualValues(t, tc.runs, runs.Load(), "runs after the first call")
			assert.Positive(t, p.Injected(tc.rules[0].Action), "the proxy injected its fault")

			p.Reset()
			got, _, err = idem.Do(t.Context(), g, idem.Request{Key: key}, handler)
			assertOutcome(t, result, key, got, err)
			assert.EqualValues(t, max(tc.runs, 1)+boolInt(tc.failing), runs.Load(), "runs in all")
			if tc.attach {
				assert.Equal(t, 1, counter(t, raw, effects, key), "the business write landed once")
			}
		})
	}
}

// TestProxyTimeoutAfterApply delays the claim's response past the caller's deadline: the
// claim landed, the caller saw a timeout. The key stays held until the lease (the deadline
// plus the margin) ends, and then runs once.
func TestProxyTimeoutAfterApply(t *testing.T) {
	t.Parallel()
	raw := ddblocal.Client(t)
	table := ddblocal.NewTable(t, raw)
	p, client := newProxy(t)
	const margin = 300 * time.Millisecond
	g, err := idem.New(newStore(t, client, table), "test", idem.WithScope("timeout"), idem.WithLeaseMargin(margin))
	require.NoError(t, err)
	var runs atomic.Int32
	handler := func(context.Context) (string, error) { runs.Add(1); return "r:late", nil }

	p.Add(ddbfault.Rule{Op: "PutItem", Action: ddbfault.Delay, Delay: 400 * time.Millisecond, Times: 1})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "late"}, handler)
	cancel()
	require.ErrorIs(t, err, idem.ErrStore)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Zero(t, runs.Load())

	var got string
	deadline := time.Now().Add(5 * time.Second)
	for attempt := 0; ; attempt++ {
		got, _, err = idem.Do(t.Context(), g, idem.Request{Key: "late"}, handler)
		if err == nil || time.Now().After(deadline) {
			break
		}
		require.ErrorIs(t, err, idem.ErrInProgress, fmt.Sprintf("attempt %d", attempt))
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err)
	assert.Equal(t, "r:late", got)
	assert.EqualValues(t, 1, runs.Load())
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestProxyTakeoverKeepsCheckpoint takes over the record of an owner that recorded the
// checkpoint "charged" and died, through a proxy that cuts the response of the claim that
// takes it over: the SDK resends the PutItem, which meets the record its first attempt
// wrote. The checkpoint must be in that record, for this owner and for the next one, whose
// takeover is cut the same way; and through a batch claim too.
func TestProxyTakeoverKeepsCheckpoint(t *testing.T) {
	t.Parallel()
	raw := ddblocal.Client(t)
	table := ddblocal.NewTable(t, raw)
	clock := storetest.NewClock()
	opts := []idem.Option{idem.WithClock(clock), idem.WithScope("proxy-takeover"), idem.WithLease(time.Minute)}
	direct, err := idem.New(newStore(t, raw, table), "test", opts...)
	require.NoError(t, err)
	p, client := newProxy(t)
	proxied, err := idem.New(newStore(t, client, table), "test", opts...)
	require.NoError(t, err)

	// dies runs an owner of key on g that does work and then hangs past its lease.
	var hung []chan struct{}
	var ended []chan error
	dies := func(g *idem.Guard, key string, work func(ctx context.Context) error) {
		started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			_, _, err := idem.Do(t.Context(), g, idem.Request{Key: key}, func(ctx context.Context) (string, error) {
				err := work(ctx)
				close(started)
				<-release
				return "late", err
			})
			done <- err
		}()
		select {
		case <-started:
		case err := <-done:
			t.Fatalf("owner of %s did not start: %v", key, err)
		}
		hung, ended = append(hung, release), append(ended, done)
	}
	// cutTakeover lets the next claim through (it is refused: it does not carry the
	// checkpoint) and cuts the response of the one after, which carries it.
	cutTakeover := func() {
		p.Reset()
		p.Add(ddbfault.Rule{Op: "PutItem", Action: ddbfault.Delay, Times: 1})
		p.Add(ddbfault.Rule{Op: "PutItem", Action: ddbfault.Cut, Times: 1})
	}

	dies(direct, "single", func(ctx context.Context) error { return idem.Checkpoint(ctx, "charged") })
	clock.Advance(2 * time.Minute)
	cutTakeover()
	seen := ""
	dies(proxied, "single", func(ctx context.Context) error { seen = idem.LastCheckpoint(ctx); return nil })
	assert.Equal(t, "charged", seen, "the first taker")
	assert.Equal(t, 1, p.Injected(ddbfault.Cut))
	clock.Advance(2 * time.Minute)
	cutTakeover()
	got, _, err := idem.Do(t.Context(), proxied, idem.Request{Key: "single"}, func(ctx context.Context) (string, error) {
		return idem.LastCheckpoint(ctx), nil
	})
	require.NoError(t, err)
	assert.Equal(t, "charged", got, "the second taker")
	assert.Equal(t, 2, p.Injected(ddbfault.Cut))

	// The batch path: the read-back shows the refusing record, so the first PutItem is the
	// claim that carries the checkpoint.
	dies(direct, "batch", func(ctx context.Context) error { return idem.Checkpoint(ctx, "charged") })
	clock.Advance(2 * time.Minute)
	p.Reset()
	p.Add(ddbfault.Rule{Op: "PutItem", Action: ddbfault.Cut, Times: 1})
	b := proxied.Claim(t.Context(), []idem.Request{{Key: "batch"}})
	got, _, err = idem.DoClaimed(t.Context(), b, 0, func(ctx context.Context) (string, error) {
		return idem.LastCheckpoint(ctx), nil
	})
	require.NoError(t, err)
	require.NoError(t, b.Settle(t.Context())[0])
	assert.Equal(t, "charged", got, "the batch taker")
	assert.Equal(t, 3, p.Injected(ddbfault.Cut))

	for i := range hung {
		close(hung[i])
		require.ErrorIs(t, <-ended[i], idem.ErrLeaseLost, "a dead owner never overwrites its successor")
	}
}
