package sqs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// Tests of errors.go: a recovered panic is a *PanicError that carries the value and the
// stack and unwraps to the value when it is an error, and the errors of held-back messages
// wrap both their sentinel and the failure that held them back.

func TestPanicError(t *testing.T) {
	t.Parallel()
	errCorrupt := errors.New("ledger corrupted")
	tests := []struct {
		name   string
		value  any
		unwrap error
	}{
		{"an error", errCorrupt, errCorrupt},
		{"a string", "ledger corrupted", nil},
		{"a number", 42, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			guard, err := idem.New(memstore.New(), "test")
			require.NoError(t, err)
			h, err := sqs.New(guard, func(context.Context, events.SQSMessage) error { panic(tc.value) })
			require.NoError(t, err)
			rep, err := h.Process(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m-1", "{}")}})
			require.NoError(t, err)

			var pe *sqs.PanicError
			require.ErrorAs(t, rep.Outcomes[0].Err, &pe)
			assert.Equal(t, tc.value, pe.Value)
			assert.Contains(t, string(pe.Stack), "TestPanicError", "the panicking goroutine's stack")
			assert.Equal(t, tc.unwrap, pe.Unwrap())
			if tc.unwrap != nil {
				require.ErrorIs(t, rep.Outcomes[0].Err, tc.unwrap)
			}
		})
	}
}

// A held-back message's error is its sentinel and the failure that held it back.
func TestHeldBackErrorsWrapTheirCause(t *testing.T) {
	t.Parallel()
	errLocked := errors.New("ledger: account locked")
	tests := []struct {
		name     string
		arn      string
		msgs     []events.SQSMessage
		sentinel error
	}{
		{
			name:     "group stopped",
			arn:      ".fifo",
			msgs:     []events.SQSMessage{withGroup(message("m-1", "a"), "g"), withGroup(message("m-2", "b"), "g")},
			sentinel: sqs.ErrGroupStopped,
		},
		{
			name:     "duplicate failed",
			msgs:     []events.SQSMessage{withKey(message("m-1", "a"), "k"), withKey(message("m-2", "a"), "k")},
			sentinel: sqs.ErrDuplicateFailed,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			guard, err := idem.New(memstore.New(), "test")
			require.NoError(t, err)
			h, err := sqs.New(guard, func(context.Context, events.SQSMessage) error { return errLocked })
			require.NoError(t, err)
			for i := range tc.msgs {
				tc.msgs[i].EventSourceARN += tc.arn
			}
			rep, err := h.Process(context.Background(), events.SQSEvent{Records: tc.msgs})
			require.NoError(t, err)
			require.ErrorIs(t, rep.Outcomes[0].Err, errLocked)
			held := rep.Outcomes[1].Err
			require.ErrorIs(t, held, tc.sentinel)
			require.ErrorIs(t, held, errLocked, "the failure that held it back")
		})
	}
}

// withGroup sets m's FIFO message group.
func withGroup(m events.SQSMessage, group string) events.SQSMessage {
	m.Attributes["MessageGroupId"] = group
	return m
}
