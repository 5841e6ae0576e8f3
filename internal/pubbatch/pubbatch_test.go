package pubbatch_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pubbatch"
	"github.com/idemkit/idem/outbox"
)

// call is one Send as the fake broker saw it: its destination and its messages' ids.
type call struct {
	dest string
	ids  []string
}

func msg(id, dest, key string, size int) outbox.Message {
	return outbox.Message{ID: id, OutboxEvent: outbox.Event{Destination: dest, OrderingKey: key, Type: "T", Payload: make([]byte, size)}}
}

// recorder returns a Batcher whose Send records its calls and fails the ids in fail.
func recorder(calls *[]call, fail map[string]error, whole error) pubbatch.Batcher {
	return pubbatch.Batcher{
		Name: "testpub", MaxEntries: 3, MaxBytes: 100,
		Size: func(m outbox.Message) int { return len(m.Payload) },
		Send: func(_ context.Context, dest string, msgs []outbox.Message) ([]error, error) {
			c := call{dest: dest}
			errs := make([]error, len(msgs))
			for i, m := range msgs {
				c.ids = append(c.ids, m.ID)
				errs[i] = fail[m.ID]
			}
			*calls = append(*calls, c)
			return errs, whole
		},
	}
}

// TestCalls: calls are cut by destination, entry count and bytes, with one message per
// ordering key in each call; a key's later messages go in later rounds.
func TestCalls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msgs []outbox.Message
		want []call
	}{
		{"count", []outbox.Message{msg("a", "q", "1", 1), msg("b", "q", "2", 1), msg("c", "q", "3", 1), msg("d", "q", "4", 1)},
			[]call{{"q", []string{"a", "b", "c"}}, {"q", []string{"d"}}}},
		{"bytes", []outbox.Message{msg("a", "q", "1", 60), msg("b", "q", "2", 40), msg("c", "q", "3", 1)},
			[]call{{"q", []string{"a", "b"}}, {"q", []string{"c"}}}},
		{"oversized alone", []outbox.Message{msg("a", "q", "1", 10), msg("b", "q", "2", 500), msg("c", "q", "3", 1)},
			[]call{{"q", []string{"a"}}, {"q", []string{"b"}}, {"q", []string{"c"}}}},
		{"destinations", []outbox.Message{msg("a", "q1", "1", 1), msg("b", "q2", "2", 1), msg("c", "q1", "3", 1)},
			[]call{{"q1", []string{"a", "c"}}, {"q2", []string{"b"}}}},
		{"one per key per call", []outbox.Message{msg("a", "q", "k", 1), msg("b", "q", "k", 1), msg("c", "q", "j", 1), msg("d", "q", "k", 1)},
			[]call{{"q", []string{"a", "c"}}, {"q", []string{"b"}}, {"q", []string{"d"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls []call
			errs := recorder(&calls, nil, nil).Publish(context.Background(), tc.msgs)
			assert.Equal(t, make([]error, len(tc.msgs)), errs)
			assert.Equal(t, tc.want, calls)
		})
	}
}

// TestFailures: an entry the broker fails fails alone and holds back its key's later
// messages (not sent); a call that fails fails every message in it; outcomes of another
// length fail the call.
func TestFailures(t *testing.T) {
	t.Parallel()
	msgs := []outbox.Message{msg("a", "q", "k", 1), msg("b", "q", "j", 1), msg("c", "q", "k", 1), msg("d", "q", "j", 1)}

	refused := errors.New("InternalError: try again")
	var calls []call
	errs := recorder(&calls, map[string]error{"a": refused}, nil).Publish(context.Background(), msgs)
	require.Len(t, errs, 4)
	assert.ErrorIs(t, errs[0], refused)
	assert.NoError(t, errs[1])
	assert.ErrorIs(t, errs[2], pubbatch.ErrHeld, "k's second message waits for its first")
	assert.NoError(t, errs[3])
	assert.Equal(t, []call{{"q", []string{"a", "b"}}, {"q", []string{"d"}}}, calls, "c is never sent")

	lost := errors.New("connection reset")
	calls = nil
	errs = recorder(&calls, nil, lost).Publish(context.Background(), msgs)
	assert.ErrorIs(t, errs[0], lost)
	assert.ErrorIs(t, errs[1], lost)
	assert.ErrorIs(t, errs[2], pubbatch.ErrHeld)
	assert.ErrorIs(t, errs[3], pubbatch.ErrHeld)
	assert.Len(t, calls, 1, "the held messages are not sent")

	b := recorder(&calls, nil, nil)
	b.Send = func(context.Context, string, []outbox.Message) ([]error, error) { return []error{nil}, nil }
	for _, err := range b.Publish(context.Background(), msgs[:2]) {
		assert.Error(t, err)
	}
}

// TestAttributes: headers, the id and the type; a header whose value is empty is left
// out, since SQS and SNS refuse an empty attribute value.
func TestAttributes(t *testing.T) {
	t.Parallel()
	m := msg("id-1", "q", "k", 0)
	m.Headers = map[string]string{"tenant": "t1", "note": ""}
	assert.Equal(t, map[string]string{"tenant": "t1", outbox.IDAttribute: "id-1", "Event-Type": "T"},
		pubbatch.Attributes(m, "Event-Type"))
	assert.Equal(t, fmt.Sprint(map[string]string{"note": "", "tenant": "t1"}), fmt.Sprint(m.Headers), "the message's headers are left alone")
}

// TestGroupID: an ordering key SQS and SNS take as a message group id is kept; any other
// (a space, a non-ASCII letter, a control character, over 128 characters, none) maps to
// its SHA-256, one group per key, which they take.
func TestGroupID(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile("^[a-zA-Z0-9!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~]{1,128}$")
	for _, key := range []string{"acct-1", `!"#$%&'()*+,-./:;<=>?@[\]^_{|}~` + "`", strings.Repeat("k", 128)} {
		assert.Equal(t, key, pubbatch.GroupID(key))
	}
	seen := map[string]bool{}
	for _, key := range []string{"customer 42", "kunde-müller", strings.Repeat("k", 129), "a\tb", "", "\xff"} {
		g := pubbatch.GroupID(key)
		assert.Regexp(t, valid, g, "key %q", key)
		assert.Equal(t, g, pubbatch.GroupID(key), "deterministic")
		assert.False(t, seen[g], "one group per key")
		seen[g] = true
	}
}

// TestEntryIndex reads back only the ids EntryID makes, within the call.
func TestEntryIndex(t *testing.T) {
	t.Parallel()
	for n := range 3 {
		got, ok := pubbatch.EntryIndex(pubbatch.EntryID(n), 3)
		assert.True(t, ok)
		assert.Equal(t, n, got)
	}
	for _, id := range []string{"m3", "m-1", "m01", "x1", "m", ""} {
		_, ok := pubbatch.EntryIndex(id, 3)
		assert.False(t, ok, "%q", id)
	}
}

// TestByPosition: a result with an error code fails its entry, one without accepts it,
// and an entry the answer has no result for fails with ErrNoOutcome.
func TestByPosition(t *testing.T) {
	t.Parallel()
	code, msg := "Throttled", "slow down"
	results := []*string{nil, &code}
	errs := pubbatch.ByPosition(3, len(results), func(i int) (*string, *string) { return results[i], &msg })
	require.Len(t, errs, 3)
	assert.NoError(t, errs[0])
	assert.EqualError(t, errs[1], "Throttled: slow down")
	assert.ErrorIs(t, errs[2], pubbatch.ErrNoOutcome)
}
