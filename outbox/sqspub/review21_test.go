package sqspub_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pubbatch"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/sqspub"
)

// TestReview21_EntryTheAnswerOmitsIsNotPublished: SendMessageBatch answers a call of two
// messages listing the first as successful and saying nothing of the second (an answer
// from an SQS-compatible endpoint or proxy that drops an entry; a truncated list). sqspub
// counts every entry not listed as failed as sent, so the relay records the second event
// as published (its guard completes the event id) and never sends it: a committed event
// lost. pubbatch.ErrNoOutcome, which the publishers share, says "it counts as published
// only when the broker says so", and snspub does so for SNS's PublishBatch (an entry is
// published only when listed in Successful); sqspub alone does not.
//
// Expected: the second message's error wraps pubbatch.ErrNoOutcome (reported, sent again,
// deduplicated by the consumer on the event id), as snspub answers. Severity: lost event
// (under a broker answer that omits an entry; SQS itself lists every entry), and a
// publisher that breaks the shared contract.
//
// Fails on main: the second message's error is nil.
func TestReview21_EntryTheAnswerOmitsIsNotPublished(t *testing.T) {
	t.Parallel()
	f := &fakeSQS{answer: func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		return &sqs.SendMessageBatchOutput{Successful: []types.SendMessageBatchResultEntry{{Id: in.Entries[0].Id}}}, nil
	}}
	errs := sqspub.New(f).Publish(t.Context(), []outbox.Message{msg(1, "https://sqs/q"), msg(2, "https://sqs/q")})
	require.Len(t, errs, 2)
	require.Len(t, f.calls, 1, "one call of both messages")
	assert.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], pubbatch.ErrNoOutcome, "the answer says nothing of the second message")
}
