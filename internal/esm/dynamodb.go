package esm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// StreamsAPI is the part of the DynamoDB Streams client that [DynamoDBStream] calls; a
// *dynamodbstreams.Client satisfies it.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// DynamoDBStream is the [Source] of a DynamoDB stream: it reads shards with
// DescribeStream, GetShardIterator and GetRecords, and gives each record the JSON that
// Lambda sends (events.DynamoDBEventRecord): the stream record as GetRecords returns it,
// plus eventSourceARN, the stream's ARN.
type DynamoDBStream struct {
	client StreamsAPI
	arn    string
}

// NewDynamoDBStream returns the source of the stream whose ARN is streamARN.
func NewDynamoDBStream(client StreamsAPI, streamARN string) *DynamoDBStream {
	return &DynamoDBStream{client: client, arn: streamARN}
}

// NewStreamsClient returns a DynamoDB Streams client for a local endpoint (DynamoDB
// Local), configured as dynamotest.NewClient configures the DynamoDB client.
func NewStreamsClient(endpoint string) *dynamodbstreams.Client {
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConnsPerHost = 64
		t.IdleConnTimeout = time.Minute
	})
	return dynamodbstreams.New(dynamodbstreams.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local", Source: "esm"}, nil
		}),
		HTTPClient: httpClient,
	})
}

// TableStreamARN returns the ARN of table's stream (LatestStreamArn), or an error when the
// table has no stream.
func TableStreamARN(ctx context.Context, client *dynamodb.Client, table string) (string, error) {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", fmt.Errorf("esm: describe table %s: %w", table, err)
	}
	if out.Table == nil || out.Table.LatestStreamArn == nil {
		return "", fmt.Errorf("esm: table %s has no stream", table)
	}
	return *out.Table.LatestStreamArn, nil
}

// ARN returns the stream's ARN, the eventSourceARN of its records.
func (s *DynamoDBStream) ARN() string { return s.arn }

// Shards lists the stream's shards, following DescribeStream's pages.
func (s *DynamoDBStream) Shards(ctx context.Context) ([]Shard, error) {
	var shards []Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.arn)}
	for {
		out, err := s.client.DescribeStream(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, sh := range out.StreamDescription.Shards {
			shards = append(shards, Shard{ID: aws.ToString(sh.ShardId), ParentID: aws.ToString(sh.ParentShardId)})
		}
		if out.StreamDescription.LastEvaluatedShardId == nil {
			return shards, nil
		}
		in.ExclusiveStartShardId = out.StreamDescription.LastEvaluatedShardId
	}
}

// emptyReads bounds how many empty GetRecords pages one Read follows: DynamoDB Streams may
// answer an open shard with an empty page before the records behind it.
const emptyReads = 3

// Read returns up to limit records after the sequence number after, from a new shard
// iterator (TRIM_HORIZON, or AFTER_SEQUENCE_NUMBER).
func (s *DynamoDBStream) Read(ctx context.Context, shard, after string, limit int) ([]Record, bool, error) {
	in := &dynamodbstreams.GetShardIteratorInput{
		StreamArn:         aws.String(s.arn),
		ShardId:           aws.String(shard),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	}
	if after != "" {
		in.ShardIteratorType = types.ShardIteratorTypeAfterSequenceNumber
		in.SequenceNumber = aws.String(after)
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
		out, err := s.client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{
			ShardIterator: iter,
			Limit:         aws.Int32(int32(min(limit, 1000))),
		})
		if err != nil {
			return nil, false, err
		}
		if len(out.Records) > 0 {
			recs := make([]Record, len(out.Records))
			for i, r := range out.Records {
				if recs[i], err = s.record(r); err != nil {
					return nil, false, err
				}
			}
			return recs, false, nil
		}
		iter = out.NextShardIterator
	}
	return nil, iter == nil, nil
}

// record turns a stream record into the JSON of an events.DynamoDBEventRecord.
func (s *DynamoDBStream) record(r types.Record) (Record, error) {
	if r.Dynamodb == nil || r.Dynamodb.SequenceNumber == nil {
		return Record{}, errors.New("esm: a stream record without a sequence number")
	}
	sr := r.Dynamodb
	change := events.DynamoDBStreamRecord{
		Keys:           attributes(sr.Keys),
		NewImage:       attributes(sr.NewImage),
		OldImage:       attributes(sr.OldImage),
		SequenceNumber: *sr.SequenceNumber,
		SizeBytes:      aws.ToInt64(sr.SizeBytes),
		StreamViewType: string(sr.StreamViewType),
	}
	if sr.ApproximateCreationDateTime != nil {
		change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *sr.ApproximateCreationDateTime}
	}
	rec := events.DynamoDBEventRecord{
		AWSRegion:      aws.ToString(r.AwsRegion),
		Change:         change,
		EventID:        aws.ToString(r.EventID),
		EventName:      string(r.EventName),
		EventSource:    aws.ToString(r.EventSource),
		EventVersion:   aws.ToString(r.EventVersion),
		EventSourceArn: s.arn,
	}
	if r.UserIdentity != nil {
		rec.UserIdentity = &events.DynamoDBUserIdentity{
			Type:        aws.ToString(r.UserIdentity.Type),
			PrincipalID: aws.ToString(r.UserIdentity.PrincipalId),
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return Record{}, fmt.Errorf("esm: encode stream record %s: %w", *sr.SequenceNumber, err)
	}
	return Record{SequenceNumber: *sr.SequenceNumber, Event: b}, nil
}

// attributes converts a stream image to the events package's attribute values; nil for
// none, so that the key is left out of the JSON as Lambda leaves it out.
func attributes(m map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = attribute(v)
	}
	return out
}

func attribute(v types.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = attribute(e)
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		return events.NewMapAttribute(attributes(v.Value))
	}
	// The SDK's unknown union member: a type newer than this code. Keep its place as
	// NULL rather than fail the whole stream.
	return events.NewNullAttribute()
}
