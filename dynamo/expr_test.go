package dynamo_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
)

// exprRequest is what one request sent: its expressions, names and value names.
type exprRequest struct {
	cond, update string
	names        map[string]string
	values       []string
}

// TestExpressions pins the condition and update expressions of each conditional request,
// with the default attribute names and with names that expression placeholders may not
// hold: the expressions use fixed placeholders, the names map them to the configured
// attributes, and every placeholder and value used is given and every one given is used
// (DynamoDB refuses unused ones).
func TestExpressions(t *testing.T) {
	t.Parallel()
	const (
		claim = "attribute_not_exists(#id) OR #exp <= :now OR (#status = :inprogress AND #lease <= :now_ms AND " +
			"(attribute_not_exists(#token) OR #token <> :released) AND "
		owned = "#token = :token AND #status = :inprogress"
		token = "0123456789abcdef0123456789abcdef"
	)
	ops := []struct {
		name       string
		send       func(context.Context, *dynamo.Store) error
		cond       string
		update     string // "" when the request has no update expression
		placehold  []string
		valueNames []string
	}{
		{
			"ClaimFresh",
			func(ctx context.Context, s *dynamo.Store) error {
				_, _, err := s.Claim(ctx, record("k", time.Now(), token), time.Now())
				return err
			},
			claim + "(attribute_not_exists(#cp) OR #cp = :empty))", "",
			[]string{"#id", "#exp", "#status", "#lease", "#token", "#cp"}, []string{":now", ":now_ms", ":inprogress", ":released", ":empty"},
		},
		{
			"ClaimCarrying",
			func(ctx context.Context, s *dynamo.Store) error {
				rec := record("k", time.Now(), token)
				rec.Checkpoint = "step-2"
				_, _, err := s.Claim(ctx, rec, time.Now())
				return err
			},
			claim + "#cp = :cp AND (attribute_not_exists(#cpseq) OR #cpseq = :seq) AND #fp = :fp)", "",
			[]string{"#id", "#exp", "#status", "#lease", "#token", "#cp", "#cpseq", "#fp"},
			[]string{":now", ":now_ms", ":inprogress", ":cp", ":seq", ":fp", ":released"},
		},
		{
			"ClaimCarryingNumberedWithoutFingerprint",
			func(ctx context.Context, s *dynamo.Store) error {
				rec := record("k", time.Now(), token)
				rec.Checkpoint, rec.CheckpointSeq, rec.Fingerprint = "step-2", 2, ""
				_, _, err := s.Claim(ctx, rec, time.Now())
				return err
			},
			claim + "#cp = :cp AND #cpseq = :seq AND (attribute_not_exists(#fp) OR #fp = :empty))", "",
			[]string{"#id", "#exp", "#status", "#lease", "#token", "#cp", "#cpseq", "#fp"},
			[]string{":now", ":now_ms", ":inprogress", ":cp", ":seq", ":empty", ":released"},
		},
		{
			"Complete",
			func(ctx context.Context, s *dynamo.Store) error { return s.Complete(ctx, completed(), nil) },
			owned,
			"SET #status = :status, #v = :v, #exp = :exp, #enc = :enc, #data = :data, #fp = :fp REMOVE #lease, #dref",
			[]string{"#status", "#v", "#exp", "#enc", "#data", "#fp", "#lease", "#dref", "#token"},
			[]string{":status", ":v", ":exp", ":enc", ":data", ":fp", ":token", ":inprogress"},
		},
		{
			"CompleteAttached",
			func(ctx context.Context, s *dynamo.Store) error {
				return s.Complete(ctx, completed(), []any{types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{}}})
			},
			owned,
			"SET #status = :status, #v = :v, #exp = :exp, #enc = :enc, #data = :data, #fp = :fp REMOVE #lease, #dref",
			[]string{"#status", "#v", "#exp", "#enc", "#data", "#fp", "#lease", "#dref", "#token"},
			[]string{":status", ":v", ":exp", ":enc", ":data", ":fp", ":token", ":inprogress"},
		},
		{
			"Release",
			func(ctx context.Context, s *dynamo.Store) error { return s.Release(ctx, "k", token, time.Now()) },
			owned, "SET #lease = :ended, #token = :released",
			[]string{"#lease", "#token", "#status"}, []string{":ended", ":released", ":token", ":inprogress"},
		},
		{
			"Extend",
			func(ctx context.Context, s *dynamo.Store) error {
				return s.Extend(ctx, "k", token, time.Now().Add(time.Minute))
			},
			owned + " AND (attribute_not_exists(#lease) OR #lease <= :end)", "SET #lease = :end",
			[]string{"#lease", "#token", "#status"}, []string{":end", ":token", ":inprogress"},
		},
		{
			"Checkpoint",
			func(ctx context.Context, s *dynamo.Store) error { return s.SetCheckpoint(ctx, "k", token, "step-3", 1) },
			owned + " AND (attribute_not_exists(#cpseq) OR #cpseq < :seq OR (#cpseq = :seq AND #cp = :cp))",
			"SET #cp = :cp, #cpseq = :seq",
			[]string{"#cp", "#cpseq", "#token", "#status"}, []string{":cp", ":seq", ":token", ":inprogress"},
		},
	}
	renamed := dynamo.Attributes{
		ID: "pk", Status: "idem.status", Expiration: "ttl", InProgressExpiration: "lease-end",
		Validation: "fp hash", Data: "body", DataRef: "body#ref", LeaseToken: "owner:token",
		Checkpoint: "cp[0]", CheckpointSeq: "cp seq", Version: "schema", Encoding: "content-encoding",
	}
	layouts := []struct {
		name  string
		attrs dynamo.Attributes
		opts  []dynamo.Option
	}{
		{"Defaults", dynamo.DefaultAttributes(), nil},
		{"Renamed", renamed, []dynamo.Option{dynamo.WithAttributes(renamed)}},
	}
	for _, l := range layouts {
		byPlaceholder := map[string]string{
			"#id": l.attrs.ID, "#status": l.attrs.Status, "#exp": l.attrs.Expiration,
			"#lease": l.attrs.InProgressExpiration, "#fp": l.attrs.Validation, "#data": l.attrs.Data,
			"#dref": l.attrs.DataRef, "#token": l.attrs.LeaseToken, "#cp": l.attrs.Checkpoint, "#cpseq": l.attrs.CheckpointSeq,
			"#v": l.attrs.Version, "#enc": l.attrs.Encoding,
		}
		for _, op := range ops {
			t.Run(l.name+"/"+op.name, func(t *testing.T) {
				t.Parallel()
				var got []exprRequest
				api := &fakeAPI{
					put: func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
						got = append(got, exprRequest{aws.ToString(in.ConditionExpression), "", in.ExpressionAttributeNames, keys(in.ExpressionAttributeValues)})
						return &dynamodb.PutItemOutput{}, nil
					},
					update: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
						got = append(got, exprRequest{aws.ToString(in.ConditionExpression), aws.ToString(in.UpdateExpression), in.ExpressionAttributeNames, keys(in.ExpressionAttributeValues)})
						return &dynamodb.UpdateItemOutput{}, nil
					},
					transact: func(in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
						u := in.TransactItems[0].Update
						require.NotNil(t, u, "the completion is the transaction's first item")
						got = append(got, exprRequest{aws.ToString(u.ConditionExpression), aws.ToString(u.UpdateExpression), u.ExpressionAttributeNames, keys(u.ExpressionAttributeValues)})
						return &dynamodb.TransactWriteItemsOutput{}, nil
					},
					del: func(in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
						got = append(got, exprRequest{aws.ToString(in.ConditionExpression), "", in.ExpressionAttributeNames, keys(in.ExpressionAttributeValues)})
						return &dynamodb.DeleteItemOutput{}, nil
					},
				}
				s, err := dynamo.New(api, "t", l.opts...)
				require.NoError(t, err)
				require.NoError(t, op.send(context.Background(), s))
				require.Len(t, got, 1, "one request")
				req := got[0]
				assert.Equal(t, op.cond, req.cond)
				assert.Equal(t, op.update, req.update)

				wantNames := make(map[string]string, len(op.placehold))
				for _, ph := range op.placehold {
					wantNames[ph] = byPlaceholder[ph]
				}
				assert.Equal(t, wantNames, req.names)
				assert.ElementsMatch(t, op.valueNames, req.values)
				used := regexp.MustCompile(`[#:][A-Za-z0-9_]+`).FindAllString(req.cond+" "+req.update, -1)
				for _, u := range used {
					if u[0] == '#' {
						assert.Contains(t, req.names, u, "placeholder used but not named")
					} else {
						assert.Contains(t, req.values, u, "value used but not given")
					}
				}
				for ph := range req.names {
					assert.Contains(t, used, ph, "placeholder named but not used")
				}
				for _, v := range req.values {
					assert.Contains(t, used, v, "value given but not used")
				}
			})
		}
	}
}

// completed returns a completed record of key "k" with a small result inline.
func completed() *idemstore.Record {
	rec := record("k", time.Now(), "0123456789abcdef0123456789abcdef")
	rec.Status, rec.Data, rec.Encoding = idemstore.StatusCompleted, []byte(`{"n":1}`), "json"
	return rec
}

// keys returns the names of the expression attribute values.
func keys(m map[string]types.AttributeValue) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
