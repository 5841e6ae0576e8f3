package kinesispub_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/awsjsontest"
	"github.com/idemkit/idem/internal/pubbatch"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/kinesispub"
)

// The SDK's client satisfies the publisher's interface.
var _ kinesispub.API = (*kinesis.Client)(nil)

// putRecords is a PutRecords request as the wire carries it (Data is base64 in the JSON,
// which []byte decodes).
type putRecords struct {
	StreamName, StreamARN string
	Records               []struct {
		Data         []byte
		PartitionKey string
	}
}

// fakeKinesis answers PutRecords, failing the records whose event id is in fail (with
// Kinesis's throttling code), or every call with err.
func fakeKinesis(t *testing.T, fail map[string]bool, err error) (*awsjsontest.Server, *kinesis.Client) {
	t.Helper()
	srv := awsjsontest.Start(t, "Kinesis_20131202.PutRecords", func(body []byte) (any, error) {
		if err != nil {
			return nil, err
		}
		var in putRecords
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, err
		}
		var records []map[string]string
		failed := 0
		for i, r := range in.Records {
			var env outbox.Envelope
			if err := json.Unmarshal(r.Data, &env); err != nil {
				return nil, err
			}
			if fail[env.IdempotencyKey] {
				failed++
				records = append(records, map[string]string{"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "slow down"})
			} else {
				records = append(records, map[string]string{"SequenceNumber": fmt.Sprint(1000 + i), "ShardId": "shardId-000000000000"})
			}
		}
		return map[string]any{"FailedRecordCount": failed, "Records": records}, nil
	})
	return srv, kinesis.New(kinesis.Options{
		Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1, Credentials: aws.AnonymousCredentials{},
	})
}

func calls(t *testing.T, srv *awsjsontest.Server) []putRecords {
	t.Helper()
	var out []putRecords
	for _, b := range srv.Bodies() {
		var in putRecords
		require.NoError(t, json.Unmarshal(b, &in))
		out = append(out, in)
	}
	return out
}

func msg(i int, stream string) outbox.Message {
	return outbox.Message{
		OutboxEvent: outbox.Event{Destination: stream, OrderingKey: fmt.Sprintf("acct-%d", i), Type: "Paid",
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Headers: map[string]string{"tenant": "t1"}},
		ID: fmt.Sprintf("id-%d", i),
	}
}

// TestPublishShapes: 501 messages to a stream by name and one to a stream by ARN go out
// as three calls (500 + 1 + 1); each record's partition key is the ordering key and its
// data the message's envelope.
func TestPublishShapes(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:kinesis:eu-west-1:123456789012:stream/audit"
	var msgs []outbox.Message
	for i := range 501 {
		msgs = append(msgs, msg(i, "orders"))
	}
	msgs = append(msgs, msg(501, arn))
	srv, client := fakeKinesis(t, nil, nil)
	assert.Equal(t, make([]error, 502), kinesispub.New(client).Publish(context.Background(), msgs))

	got := calls(t, srv)
	require.Len(t, got, 3)
	assert.Len(t, got[0].Records, 500)
	assert.Equal(t, "orders", got[1].StreamName)
	r := got[1].Records[0] // msgs[500]
	assert.Equal(t, "acct-500", r.PartitionKey)
	assert.JSONEq(t, `{"idempotencyKey":"id-500","type":"Paid","orderingKey":"acct-500","headers":{"tenant":"t1"},"payload":{"n":500}}`, string(r.Data))
	assert.Equal(t, arn, got[2].StreamARN)
	assert.Empty(t, got[2].StreamName)
}

// TestPublishOrder: two messages of one ordering key go in successive calls; when a
// record of a key fails, the key's later records in the same Publish fail unsent, while
// other keys go on; a call that fails fails all its records.
func TestPublishOrder(t *testing.T) {
	t.Parallel()
	msgs := []outbox.Message{msg(0, "s"), msg(1, "s"), msg(2, "s"), msg(3, "s"), msg(4, "s")}
	msgs[2].OrderingKey = "acct-0" // 0, 2, 4 are one key's, in that order
	msgs[4].OrderingKey = "acct-0"
	msgs[3].OrderingKey = "acct-1" // 1, 3 another's
	srv, client := fakeKinesis(t, map[string]bool{"id-2": true}, nil)
	errs := kinesispub.New(client).Publish(context.Background(), msgs)
	assert.NoError(t, errs[0])
	assert.NoError(t, errs[1])
	assert.ErrorContains(t, errs[2], "ProvisionedThroughputExceededException")
	assert.NoError(t, errs[3])
	assert.ErrorIs(t, errs[4], pubbatch.ErrHeld, "acct-0's third record waits for its second")
	var keys [][]string
	for _, c := range calls(t, srv) {
		var k []string
		for _, r := range c.Records {
			k = append(k, r.PartitionKey)
		}
		keys = append(keys, k)
	}
	assert.Equal(t, [][]string{{"acct-0", "acct-1"}, {"acct-0", "acct-1"}}, keys, "one record per key per call; id-4 never sent")

	_, down := fakeKinesis(t, nil, errors.New("down"))
	for _, err := range kinesispub.New(down).Publish(context.Background(), msgs[:2]) {
		assert.ErrorContains(t, err, "InternalFailure")
	}
}

// TestPartitionKey: the ordering key, its SHA-256 when Kinesis would refuse it as too
// long (more than 256 UTF-16 code units), the event id when there is none.
func TestPartitionKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 257)
	sum := sha256.Sum256([]byte(long))
	astral := strings.Repeat("😀", 129) // 258 UTF-16 code units
	asum := sha256.Sum256([]byte(astral))
	tests := []struct {
		name, key, want string
	}{
		{"ordering key", "acct-1", "acct-1"},
		{"256 characters", strings.Repeat("é", 256), strings.Repeat("é", 256)},
		{"too long", long, hex.EncodeToString(sum[:])},
		{"128 emoji", strings.Repeat("😀", 128), strings.Repeat("😀", 128)},
		{"too long in UTF-16", astral, hex.EncodeToString(asum[:])},
		{"none", "", "id-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := msg(1, "s")
			m.OrderingKey = tc.key
			assert.Equal(t, tc.want, kinesispub.PartitionKey(m))
		})
	}
}

// TestPublishBytes: PutRecords carries at most 5 MiB, so six records of 900 KiB (each
// within Kinesis's 1 MiB per record) go out as two calls.
func TestPublishBytes(t *testing.T) {
	t.Parallel()
	var msgs []outbox.Message
	for i := range 6 {
		m := msg(i, "s")
		m.Payload = []byte(`"` + strings.Repeat("x", 900<<10) + `"`)
		msgs = append(msgs, m)
	}
	srv, client := fakeKinesis(t, nil, nil)
	assert.Equal(t, make([]error, 6), kinesispub.New(client).Publish(context.Background(), msgs))
	got := calls(t, srv)
	require.Len(t, got, 2)
	assert.Len(t, got[0].Records, 5)
}

// TestPublishRecordOverTheRecordLimit: a record over Kinesis's 1 MiB per record goes in a
// call of its own, so the call Kinesis refuses holds it alone and its call-mates are
// written.
func TestPublishRecordOverTheRecordLimit(t *testing.T) {
	t.Parallel()
	var msgs []outbox.Message
	for i := range 3 {
		m := msg(i, "s")
		if i == 1 {
			m.Payload = []byte(`"` + strings.Repeat("x", 1<<20) + `"`)
		}
		msgs = append(msgs, m)
	}
	srv, client := fakeKinesis(t, nil, nil)
	assert.Equal(t, make([]error, 3), kinesispub.New(client).Publish(context.Background(), msgs))
	got := calls(t, srv)
	require.Len(t, got, 2)
	assert.Len(t, got[0].Records, 1, "the large record alone")
	assert.Len(t, got[1].Records, 2)
}
