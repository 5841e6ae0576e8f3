// Package esmkinesis is the Kinesis [esm.Source] of the root module's esm package: it
// reads a Kinesis data stream's shards (ListShards, GetShardIterator, GetRecords) and
// gives each record the JSON Lambda sends (events.KinesisEventRecord): data in base64,
// partitionKey, sequenceNumber, approximateArrivalTimestamp and kinesisSchemaVersion under
// "kinesis"; eventID "<shardId>:<sequenceNumber>", eventName "aws:kinesis:record",
// eventSource "aws:kinesis", eventVersion, invokeIdentityArn, awsRegion and
// eventSourceARN. An [esm.Poller] over it invokes a handler as Lambda's event source
// mapping for Kinesis does, under the rules of package esm.
//
// It lives in the lab so that the Kinesis SDK stays out of the library's go.mod; package
// kinesalite runs the Kinesis API for it on 127.0.0.1:
//
//	client := kinesalite.Client(t)
//	src, err := esmkinesis.Open(ctx, client, streamName)
//	p, err := esm.New(src, handler, esm.WithReportBatchItemFailures())
//	report, err := p.Drain(ctx)
//
// AWS documentation: https://docs.aws.amazon.com/lambda/latest/dg/with-kinesis.html and
// https://docs.aws.amazon.com/lambda/latest/dg/services-kinesis-batchfailurereporting.html.
package esmkinesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/idemkit/idem/internal/esm"
)

// DefaultInvokeIdentityARN is the invokeIdentityArn of every record: the role Lambda
// reads the stream with.
const DefaultInvokeIdentityARN = "arn:aws:iam::000000000000:role/esm-test"

// API is the part of the Kinesis client that [Stream] calls; a *kinesis.Client
// satisfies it.
type API interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// Stream is the [esm.Source] of one Kinesis data stream. It is safe for concurrent use.
type Stream struct {
	client API
	name   string
	arn    string
	region string
}

// Open returns the source of the stream named name, whose ARN (and region) it reads
// with DescribeStreamSummary.
func Open(ctx context.Context, client API, name string) (*Stream, error) {
	out, err := client.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("esmkinesis: describe stream %s: %w", name, err)
	}
	arn := aws.ToString(out.StreamDescriptionSummary.StreamARN)
	// arn:aws:kinesis:<region>:<account>:stream/<name>
	parts := strings.Split(arn, ":")
	if len(parts) < 6 {
		return nil, fmt.Errorf("esmkinesis: stream %s has an ARN without a region: %q", name, arn)
	}
	return &Stream{client: client, name: name, arn: arn, region: parts[3]}, nil
}

// ARN returns the stream's ARN, the eventSourceARN of its records.
func (s *Stream) ARN() string { return s.arn }

// Shards lists the stream's shards, following ListShards' pages.
func (s *Stream) Shards(ctx context.Context) ([]esm.Shard, error) {
	var shards []esm.Shard
	in := &kinesis.ListShardsInput{StreamName: aws.String(s.name)}
	for {
		out, err := s.client.ListShards(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, sh := range out.Shards {
			shards = append(shards, esm.Shard{ID: aws.ToString(sh.ShardId), ParentID: aws.ToString(sh.ParentShardId)})
		}
		if out.NextToken == nil {
			return shards, nil
		}
		// A page after the first names the token alone, not the stream.
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// emptyReads bounds how many empty GetRecords pages one Read follows: Kinesis may answer
// with empty pages before the records behind them.
const emptyReads = 3

// Read returns up to limit records after the sequence number after, from a new shard
// iterator (TRIM_HORIZON, or AFTER_SEQUENCE_NUMBER).
func (s *Stream) Read(ctx context.Context, shard, after string, limit int) ([]esm.Record, bool, error) {
	in := &kinesis.GetShardIteratorInput{
		StreamName:        aws.String(s.name),
		ShardId:           aws.String(shard),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	}
	if after != "" {
		in.ShardIteratorType = types.ShardIteratorTypeAfterSequenceNumber
		in.StartingSequenceNumber = aws.String(after)
	}
	it, err := s.client.GetShardIterator(ctx, in)
	if err != nil {
		return nil, false, err
	}
	iter := it.ShardIterator
	for range emptyReads {
		if iter == nil {
			return nil, true, nil
		}
		out, err := s.client.GetRecords(ctx, &kinesis.GetRecordsInput{
			ShardIterator: iter,
			Limit:         aws.Int32(int32(min(limit, 10000))),
		})
		if err != nil {
			return nil, false, err
		}
		if len(out.Records) > 0 {
			recs := make([]esm.Record, len(out.Records))
			for i, r := range out.Records {
				if recs[i], err = s.record(shard, r); err != nil {
					return nil, false, err
				}
			}
			return recs, false, nil
		}
		iter = out.NextShardIterator
	}
	return nil, iter == nil, nil
}

// record turns a Kinesis record into the JSON of an events.KinesisEventRecord.
func (s *Stream) record(shard string, r types.Record) (esm.Record, error) {
	if r.SequenceNumber == nil {
		return esm.Record{}, errors.New("esmkinesis: a record without a sequence number")
	}
	seq := *r.SequenceNumber
	kr := events.KinesisRecord{
		Data:                 r.Data,
		PartitionKey:         aws.ToString(r.PartitionKey),
		SequenceNumber:       seq,
		KinesisSchemaVersion: "1.0",
	}
	if r.ApproximateArrivalTimestamp != nil {
		kr.ApproximateArrivalTimestamp = events.SecondsEpochTime{Time: *r.ApproximateArrivalTimestamp}
	}
	if r.EncryptionType == types.EncryptionTypeKms {
		kr.EncryptionType = string(r.EncryptionType)
	}
	b, err := json.Marshal(events.KinesisEventRecord{
		AwsRegion:         s.region,
		EventID:           shard + ":" + seq,
		EventName:         "aws:kinesis:record",
		EventSource:       "aws:kinesis",
		EventSourceArn:    s.arn,
		EventVersion:      "1.0",
		InvokeIdentityArn: DefaultInvokeIdentityARN,
		Kinesis:           kr,
	})
	if err != nil {
		return esm.Record{}, fmt.Errorf("esmkinesis: encode record %s: %w", seq, err)
	}
	return esm.Record{SequenceNumber: seq, Event: b}, nil
}
