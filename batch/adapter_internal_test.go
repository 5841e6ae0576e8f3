package batch

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// fakeConfig is an adapter's configuration: the common settings and one of its own.
type fakeConfig struct {
	Settings
	key string
}

type fakeOption func(*fakeConfig) error

func withKey(k string) fakeOption {
	return func(c *fakeConfig) error { c.key = k; return nil }
}

var fakeSource = Source{Name: "fake", System: "fake", Item: "record", IDAttr: "record_id"}

func newFake(t *testing.T, guard *idem.Guard, handlerNil bool, opts ...fakeOption) (*Engine, fakeConfig, error) {
	t.Helper()
	cfg := fakeConfig{Settings: DefaultSettings("fake")}
	e, err := NewAdapter(guard, handlerNil, "NewFake", fakeSource, &cfg, opts)
	return e, cfg, err
}

// The constructor every adapter shares checks its arguments and options in order, and
// names the adapter and the option in its errors.
func TestNewAdapterErrors(t *testing.T) {
	guard, err := idem.New(memstore.New(), "fake")
	require.NoError(t, err)
	for _, tc := range []struct {
		name       string
		guard      *idem.Guard
		handlerNil bool
		opts       []fakeOption
		want       string
	}{
		{"nil guard", nil, true, nil, "idem: invalid option: fake: NewFake: guard must not be nil"},
		{"nil handler", guard, true, nil, "idem: invalid option: fake: NewFake: handler must not be nil"},
		{"concurrency", guard, false, []fakeOption{func(c *fakeConfig) error { return c.SetConcurrency(0) }},
			"idem: invalid option: fake: WithConcurrency: must be at least 1"},
		{"margin", guard, false, []fakeOption{func(c *fakeConfig) error { return c.SetDeadlineMargin(-time.Second) }},
			"idem: invalid option: fake: WithDeadlineMargin: must not be negative"},
		{"first error stops", guard, false, []fakeOption{
			func(c *fakeConfig) error { return c.OptionError("WithKey", "bad") },
			func(*fakeConfig) error { panic("not reached") },
		}, "idem: invalid option: fake: WithKey: bad"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _, err := newFake(t, tc.guard, tc.handlerNil, tc.opts...)
			assert.Nil(t, e)
			require.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.EqualError(t, err, tc.want)
		})
	}
}

// Options apply in order (nil ones skipped) to the adapter's own settings and the common
// ones, which configure the engine; without them the engine has its defaults.
func TestNewAdapterSettings(t *testing.T) {
	guard, err := idem.New(memstore.New(), "fake")
	require.NoError(t, err)

	e, cfg, err := newFake(t, guard, false)
	require.NoError(t, err)
	assert.Equal(t, defaultConfig(), e.cfg)
	assert.Empty(t, cfg.key)

	e, cfg, err = newFake(t, guard, false, withKey("a"), nil, withKey("b"),
		func(c *fakeConfig) error { return c.SetConcurrency(3) },
		func(c *fakeConfig) error { return c.SetDeadlineMargin(0) },
		func(c *fakeConfig) error { return c.SetBatchClaims(false) },
		func(c *fakeConfig) error { return c.SetWaitInFlight(true) })
	require.NoError(t, err)
	assert.Equal(t, "b", cfg.key)
	assert.Equal(t, config{concurrency: 3, margin: 0, marginSet: true, batchClaims: false, waitFlight: true}, e.cfg)
}

// Run runs each record that is to run with its own record, and maps every outcome, in
// the records' order, to the adapter's type.
func TestRun(t *testing.T) {
	guard, err := idem.New(memstore.New(), "fake")
	require.NoError(t, err)
	e, _, err := newFake(t, guard, false)
	require.NoError(t, err)

	records := []int{10, 11, 12}
	items := make([]Item, len(records))
	for i, r := range records {
		items[i] = Item{ID: strconv.Itoa(r), Key: "k" + strconv.Itoa(r), Fingerprint: []byte{byte(r)}}
	}
	items[1].Err = errors.New("no key")
	fn := func(_ context.Context, r int) error {
		if r == 12 {
			return errors.New("boom")
		}
		return nil
	}
	type outcome struct {
		Record int
		ID     string
		Status Status
		Reason Reason
	}
	rep, out := Run(context.Background(), e, records, items, fn, Mode{}, func(o Outcome, r int) outcome {
		return outcome{Record: r, ID: o.ID, Status: o.Status, Reason: o.Reason}
	})
	assert.Equal(t, []outcome{
		{10, "10", StatusRan, ""},
		{11, "11", StatusFailed, ReasonKey},
		{12, "12", StatusFailed, ReasonHandler},
	}, out)
	assert.Equal(t, 1, rep.Ran)
	assert.Equal(t, 2, rep.Failed)

	// A completed record replays without running.
	_, out = Run(context.Background(), e, records[:1], items[:1], func(context.Context, int) error {
		panic("a completed key ran again")
	}, Mode{}, func(o Outcome, r int) outcome { return outcome{Record: r, ID: o.ID, Status: o.Status} })
	assert.Equal(t, []outcome{{10, "10", StatusReplayed, ""}}, out)
}
