package kinesispub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/idemkit/idem/internal/pubbatch"
	"github.com/idemkit/idem/outbox"
)

// PutRecords' limits: records per call, bytes per call and per record (data and partition
// keys).
const (
	maxBatch       = 500
	maxBytes       = 5 << 20
	maxRecordBytes = 1 << 20
	// maxPartitionKey is the longest partition key Kinesis takes, in UTF-16 code units (as
	// Java counts a string's length: a character outside the Basic Multilingual Plane
	// counts two).
	maxPartitionKey = 256
)

// API is the Kinesis client operation the publisher calls; a *kinesis.Client has it.
type API interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

// Publisher sends outbox messages to Kinesis. It is safe for concurrent use.
type Publisher struct {
	client API
	batch  pubbatch.Batcher
}

// New returns a Publisher sending through client.
func New(client API) *Publisher {
	p := &Publisher{client: client}
	p.batch = pubbatch.Batcher{Name: "kinesispub", MaxEntries: maxBatch, MaxBytes: maxBytes, MaxMessageBytes: maxRecordBytes, Size: size, Send: p.send}
	return p
}

// Publish implements [outbox.Publisher]: one PutRecords per stream and 500 records, with
// at most one record per ordering key in a call (a key's next record goes in a later
// call, once its previous one was written). A call that fails fails its messages
// (including a call whose answer was lost: they are sent again, and the consumer
// deduplicates on the event id); a record Kinesis answers with an error code fails alone,
// and its ordering key's later messages fail unsent.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	return p.batch.Publish(ctx, msgs)
}

// send puts msgs on stream in one call. PutRecords answers one result per record, in the
// records' order.
func (p *Publisher) send(ctx context.Context, stream string, msgs []outbox.Message) ([]error, error) {
	in := &kinesis.PutRecordsInput{}
	if strings.HasPrefix(stream, "arn:") {
		in.StreamARN = aws.String(stream)
	} else {
		in.StreamName = aws.String(stream)
	}
	for _, m := range msgs {
		in.Records = append(in.Records, Entry(m))
	}
	out, err := p.client.PutRecords(ctx, in)
	if err != nil {
		return nil, err
	}
	return pubbatch.ByPosition(len(msgs), len(out.Records), func(i int) (code, message *string) {
		return out.Records[i].ErrorCode, out.Records[i].ErrorMessage
	}), nil
}

// Entry returns the PutRecords record for m, as [Publisher] sends it: its envelope as the
// data, under [PartitionKey].
func Entry(m outbox.Message) types.PutRecordsRequestEntry {
	return types.PutRecordsRequestEntry{Data: outbox.NewEnvelope(m).Bytes(), PartitionKey: aws.String(PartitionKey(m))}
}

// PartitionKey returns m's partition key: its ordering key, or, for an ordering key
// longer than the 256 characters Kinesis takes (counted in UTF-16 code units, as Kinesis
// counts them: an emoji counts two) or not valid UTF-8, the key's SHA-256 in hex (so each
// key still has one partition key of its own); the event id when it has none.
func PartitionKey(m outbox.Message) string {
	k := m.OrderingKey
	switch {
	case k == "":
		return m.ID
	case !utf8.ValidString(k) || utf16Len(k) > maxPartitionKey:
		sum := sha256.Sum256([]byte(k))
		return hex.EncodeToString(sum[:])
	}
	return k
}

// utf16Len is the length of s in UTF-16 code units.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// size is what m's record counts against PutRecords' 5 MiB.
func size(m outbox.Message) int {
	return len(outbox.NewEnvelope(m).Bytes()) + len(PartitionKey(m))
}
