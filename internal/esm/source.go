package esm

import (
	"context"
	"encoding/json"

	"github.com/idemkit/idem/internal/streamseq"
)

// Source reads the shards of one stream: a DynamoDB stream ([DynamoDBStream]), a Kinesis
// data stream, or a fake in a test. The poller calls it from one goroutine per shard.
type Source interface {
	// Shards lists the stream's shards, each with its parent's ID ("" for none).
	Shards(ctx context.Context) ([]Shard, error)
	// Read returns, in sequence order, up to limit records of shard that come after the
	// sequence number after ("" for the shard's first record). end reports that the shard
	// is closed and nothing follows the records returned.
	Read(ctx context.Context, shard, after string, limit int) (records []Record, end bool, err error)
}

// Shard names one shard of a stream and its parent.
type Shard struct {
	ID       string
	ParentID string
}

// Record is one stream record as Lambda delivers it.
type Record struct {
	// SequenceNumber is the record's place in its shard: a decimal string, and the
	// itemIdentifier a handler reports in its partial batch response.
	SequenceNumber string
	// Event is the record's JSON as it appears in the Records array of the event that
	// Lambda sends (one events.DynamoDBEventRecord or events.KinesisEventRecord).
	Event json.RawMessage
}

// SequenceLess reports whether sequence number a comes before b. Both are decimal strings
// of any length, with or without leading zeros (DynamoDB Local pads them to 21 digits).
func SequenceLess(a, b string) bool { return streamseq.Less(a, b) }

// compareSequence orders sequence numbers for the slices package.
func compareSequence(a, b string) int { return streamseq.Compare(a, b) }
