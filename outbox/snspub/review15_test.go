package snspub_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/snspub"
)

// groupIDRule is the MessageGroupId SNS FIFO topics (and SQS FIFO queues) take, as the
// PublishBatch reference states it: up to 128 characters, alphanumeric and punctuation
// (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~).
var groupIDRule = regexp.MustCompile("^[a-zA-Z0-9!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~]{1,128}$")

// fifoSNS answers PublishBatch as SNS does for the message group id: a request with an
// entry whose MessageGroupId breaks the rule is refused as a whole (InvalidParameter).
type fifoSNS struct{}

func (fifoSNS) PublishBatch(_ context.Context, in *sns.PublishBatchInput, _ ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	out := &sns.PublishBatchOutput{}
	for _, e := range in.PublishBatchRequestEntries {
		if !groupIDRule.MatchString(aws.ToString(e.MessageGroupId)) {
			return nil, errors.New("api error InvalidParameter: Invalid parameter: MessageGroupId")
		}
		out.Successful = append(out.Successful, types.PublishBatchResultEntry{Id: e.Id, MessageId: aws.String("m-" + aws.ToString(e.Id))})
	}
	return out, nil
}

// TestReview15_OrderingKeyAsMessageGroupID: on a FIFO topic the message group is the
// ordering key as it is. outbox.Record takes any ordering key (DynamoDB takes a partition
// key of up to 2048 bytes), and kinesispub hashes one too long for Kinesis; snspub (and
// sqspub, the relay cmd/outbox-relay deploys) does not, so a key SNS does not take as a
// group id (a space, a non-ASCII letter, over 128 characters) fails its event on every
// attempt, and with it every other key's event in the call.
//
//  1. A handler records an event with ordering key "customer 42" (or "kunde-müller", or
//     a 200-character key).
//  2. The relay publishes it: SNS refuses the call. It stays refused on every retry:
//     the relay stops the key, and after MaximumRetryAttempts the record is discarded.
//
// Severity: lost event (never published, on the on-failure destination), stuck key;
// call-mates of other keys fail with it. Passing means each such key gets a group id SNS
// takes (hashed, as kinesispub.PartitionKey does), or Record refuses the key.
func TestReview15_OrderingKeyAsMessageGroupID(t *testing.T) {
	t.Parallel()
	p := snspub.New(fifoSNS{})
	topic := "arn:aws:sns:eu-west-1:123456789012:orders.fifo"
	for _, key := range []string{"customer 42", "kunde-müller", strings.Repeat("k", 200)} {
		store := memstore.New()
		g, err := idem.New(store, "r15-group")
		require.NoError(t, err)
		var recErr error
		_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (string, error) {
			_, recErr = outbox.Record(ctx, outbox.Event{Destination: topic, OrderingKey: key, Type: "Paid", Payload: []byte(`{}`)})
			return "ok", nil
		})
		require.NoError(t, err)
		if recErr != nil {
			assert.ErrorIs(t, recErr, outbox.ErrInvalidEvent)
			continue
		}
		msgs := store.Outbox()
		require.Len(t, msgs, 1)
		errs := p.Publish(context.Background(), msgs)
		assert.NoError(t, errs[0], "ordering key %.20q: an event Record took is one SNS takes", key)
	}
}
