package sqs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// Tests of message.go: what becomes of one message, and why it fails.

// unit is a one-message world on the in-memory store, behind a store that fails on demand.
type unit struct {
	store *storetest.Faulty
	guard *idem.Guard
	rec   *recorder
	msg   events.SQSMessage
}

func TestFailureReasons(t *testing.T) {
	t.Parallel()
	errLedger := errors.New("ledger: account frozen")
	errBroken := errors.New("dynamodb: throttled")
	tests := []struct {
		name      string
		guardOpts []idem.Option
		opts      []sqs.Option
		before    func(t *testing.T, u *unit) // the state the batch meets
		runs      int                         // times the batch is delivered; default 1
		want      sqs.Status
		reason    sqs.Reason
		wantErr   error
	}{
		{
			name:   "handler error",
			before: func(_ *testing.T, u *unit) { u.rec.setFail(u.msg.MessageId, errLedger) },
			want:   sqs.StatusFailed, reason: sqs.ReasonHandler, wantErr: errLedger,
		},
		{
			name:   "handler panic",
			before: func(_ *testing.T, u *unit) { u.rec.panicsOn = u.msg.MessageId },
			want:   sqs.StatusFailed, reason: sqs.ReasonPanic,
		},
		{
			name: "key in flight elsewhere",
			before: func(t *testing.T, u *unit) {
				_, _, err := u.store.Claim(context.Background(), &idemstore.Record{
					Key: storedKey(t, u.guard, u.msg.MessageId), Status: idemstore.StatusInProgress,
					Expires: time.Now().Add(time.Hour), LeaseExpires: time.Now().Add(time.Minute),
					LeaseToken: "other", Version: idemstore.SchemaVersion,
				}, time.Now())
				require.NoError(t, err)
			},
			want: sqs.StatusFailed, reason: sqs.ReasonInProgress, wantErr: idem.ErrInProgress,
		},
		{
			name: "key reused with another body",
			before: func(t *testing.T, u *unit) {
				_, _, err := idem.Do(context.Background(), u.guard, idem.Request{Key: u.msg.MessageId, Fingerprint: []byte("other")},
					func(context.Context) (struct{}, error) { return struct{}{}, nil })
				require.NoError(t, err)
			},
			want: sqs.StatusFailed, reason: sqs.ReasonPayloadMismatch, wantErr: idem.ErrPayloadMismatch,
		},
		{
			name: "key function fails",
			opts: []sqs.Option{sqs.WithKey(func(events.SQSMessage) (string, error) { return "", errLedger })},
			want: sqs.StatusFailed, reason: sqs.ReasonKey, wantErr: errLedger,
		},
		{
			name: "empty key attribute",
			before: func(_ *testing.T, u *unit) {
				empty := ""
				u.msg.MessageAttributes = map[string]events.SQSMessageAttribute{sqs.KeyAttribute: {StringValue: &empty, DataType: "String"}}
			},
			want: sqs.StatusFailed, reason: sqs.ReasonKey, wantErr: idem.ErrMissingKey,
		},
		{
			name: "key longer than idem accepts",
			opts: []sqs.Option{sqs.WithKey(func(events.SQSMessage) (string, error) { return string(make([]byte, idem.MaxKeyLength+1)), nil })},
			want: sqs.StatusFailed, reason: sqs.ReasonKey, wantErr: idem.ErrInvalidKey,
		},
		{
			name: "fingerprint function fails",
			opts: []sqs.Option{sqs.WithFingerprint(func(events.SQSMessage) ([]byte, error) { return nil, errLedger })},
			want: sqs.StatusFailed, reason: sqs.ReasonKey, wantErr: errLedger,
		},
		{
			name:   "store fails to claim",
			before: func(_ *testing.T, u *unit) { u.store.Fail("claim", errBroken, false) },
			want:   sqs.StatusFailed, reason: sqs.ReasonStore, wantErr: idem.ErrStore,
		},
		{
			name:   "store fails to complete",
			before: func(_ *testing.T, u *unit) { u.store.Fail("complete", errBroken, false) },
			want:   sqs.StatusFailed, reason: sqs.ReasonStore, wantErr: errBroken,
		},
		{
			name:   "lease lost before completion",
			before: func(_ *testing.T, u *unit) { u.store.Fail("complete", idem.ErrLeaseLost, false) },
			want:   sqs.StatusFailed, reason: sqs.ReasonLeaseLost, wantErr: idem.ErrLeaseLost,
		},
		{
			name:      "permanent failure remembered",
			guardOpts: []idem.Option{idem.WithRememberFailures(func(err error) bool { return errors.Is(err, errLedger) })},
			before:    func(_ *testing.T, u *unit) { u.rec.setFail(u.msg.MessageId, errLedger) },
			runs:      2,
			want:      sqs.StatusFailed, reason: sqs.ReasonHandler, wantErr: idem.ErrFailed,
		},
		{
			name:      "completed without a stored result",
			guardOpts: []idem.Option{idem.WithMaxResultSize(1)},
			runs:      2,
			want:      sqs.StatusReplayed,
		},
		{
			name: "ran",
			want: sqs.StatusRan,
		},
		{
			name: "replayed",
			runs: 2,
			want: sqs.StatusReplayed,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := storetest.NewFaulty(memstore.New())
			rs := &reports{}
			guard, err := idem.New(store, "test", append(tc.guardOpts, idem.WithHooks(rs.hooks()))...)
			require.NoError(t, err)
			u := &unit{store: store, guard: guard, rec: newRecorder(), msg: loadEvent(t, "sqs-standard-ten").Records[0]}
			if tc.before != nil {
				tc.before(t, u)
			}
			h, err := sqs.New(guard, u.rec.handle, tc.opts...)
			require.NoError(t, err)

			var resp []byte
			for range max(tc.runs, 1) {
				resp = invoke(t, context.Background(), h, events.SQSEvent{Records: []events.SQSMessage{u.msg}})
			}
			o := rs.last(t).Outcomes[0]
			assert.Equal(t, tc.want, o.Status)
			assert.Equal(t, tc.reason, o.Reason)
			if tc.want == sqs.StatusFailed {
				assert.Equal(t, []string{u.msg.MessageId}, adaptertest.Failures(t, resp))
				require.Error(t, o.Err)
			} else {
				assert.Empty(t, adaptertest.Failures(t, resp))
				assert.NoError(t, o.Err)
			}
			if tc.wantErr != nil {
				require.ErrorIs(t, o.Err, tc.wantErr)
			}
		})
	}
}

func storedKey(t *testing.T, g *idem.Guard, key string) string {
	t.Helper()
	k, err := g.StoredKey(idem.Request{Key: key})
	require.NoError(t, err)
	return k
}

func TestPanicFailsOnlyItsMessageAndReleasesTheKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, memBackend())
	ev := loadEvent(t, "sqs-standard-ten")
	bad := ev.Records[4].MessageId
	e.rec.panicsOn = bad

	resp := invoke(t, context.Background(), e.h, ev)
	assert.Equal(t, []string{bad}, adaptertest.Failures(t, resp))
	var pe *sqs.PanicError
	require.ErrorAs(t, e.reports.last(t).Outcomes[4].Err, &pe)
	assert.Equal(t, "ledger corrupted", pe.Value)
	assert.NotEmpty(t, pe.Stack)

	e.rec.panicsOn = ""
	assert.Empty(t, adaptertest.Failures(t, invoke(t, context.Background(), e.h, redeliver(ev, bad))))
	assert.Equal(t, 2, e.rec.runsOf(bad), "the redelivery ran it again")
}

func TestDuplicatesShareAFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, memBackend())
	ev := loadEvent(t, "sqs-standard-same-key") // records 0, 1, 3, 4 share a key and a body
	e.rec.setFail(ev.Records[0].MessageId, errors.New("ledger: timeout"))

	resp := invoke(t, context.Background(), e.h, ev)
	assert.Equal(t, pick(ev, 0, 1, 3, 4), adaptertest.Failures(t, resp), "the duplicates go back to the queue with the original")
	assert.Equal(t, 1, e.rec.runsOfKey("order-2042-credit"))
	rep := e.reports.last(t)
	assert.Equal(t, map[sqs.Reason]int{sqs.ReasonHandler: 1, sqs.ReasonDuplicateFailed: 3}, rep.FailedBy())
	require.ErrorIs(t, rep.Outcomes[4].Err, sqs.ErrDuplicateFailed)

	e.rec.setFail(ev.Records[0].MessageId, nil)
	resp = invoke(t, context.Background(), e.h, redeliver(ev, pick(ev, 0, 1, 3, 4)...))
	assert.Empty(t, adaptertest.Failures(t, resp))
	rep = e.reports.last(t)
	assert.Equal(t, 1, rep.Ran)
	assert.Equal(t, 3, rep.Duplicates)
	assert.Equal(t, 4200, e.ledger.balance(t, "acc-7"))
}

func TestDuplicateKeyWithOtherBodyIsAMismatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, memBackend())
	ev := loadEvent(t, "sqs-standard-same-key")
	ev.Records[3].Body = `{"account_id":"acc-7","amount_cents":9999}` // same key, other content

	resp := invoke(t, context.Background(), e.h, ev)
	assert.Equal(t, pick(ev, 3), adaptertest.Failures(t, resp))
	o := e.reports.last(t).Outcomes[3]
	assert.Equal(t, sqs.ReasonPayloadMismatch, o.Reason)
	require.ErrorIs(t, o.Err, idem.ErrPayloadMismatch)
	assert.Equal(t, 4200, e.ledger.balance(t, "acc-7"))
}

// cancelingStore ends the invocation's context as the claim arrives, as a Lambda deadline
// would between the deadline check and the claim.
type cancelingStore struct {
	idemstore.Store
	cancel context.CancelFunc
}

func (s cancelingStore) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	s.cancel()
	return s.Store.Claim(ctx, rec, now)
}

func TestContextEndingAtTheClaimIsNotStarted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rs, rec := &reports{}, newRecorder()
	guard, err := idem.New(cancelingStore{Store: memstore.New(), cancel: cancel}, "test", idem.WithHooks(rs.hooks()))
	require.NoError(t, err)
	h, err := sqs.New(guard, rec.handle)
	require.NoError(t, err)

	ev := loadEvent(t, "sqs-standard-ten")
	ev.Records = ev.Records[:1]
	assert.Equal(t, pick(ev, 0), adaptertest.Failures(t, invoke(t, ctx, h, ev)))
	o := rs.last(t).Outcomes[0]
	assert.Equal(t, sqs.ReasonNotStarted, o.Reason)
	require.ErrorIs(t, o.Err, sqs.ErrNotStarted)
	require.ErrorIs(t, o.Err, context.Canceled)
	assert.Zero(t, rec.total())
}
