package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// TestLegacyEmptyCheckpointIsTakenOver: the release before checkpoint numbers accepted
// idem.Checkpoint(ctx, "") and the DynamoDB store wrote it as the S value "" (DynamoDB
// takes empty strings in non-key attributes). Such a record, its owner crashed and its
// lease ended, is taken over on memstore (and redisstore, and pgstore, which stored NULL),
// where "" and no checkpoint are alike: the retry runs. On DynamoDB the guard carries no
// checkpoint for prev.Checkpoint == "" and claimed with attribute_not_exists(#checkpoint),
// which the item refused; after takeoverAttempts the caller got ErrInProgress, and every
// retry did until the record expired (its handler never ran, nobody was in progress).
// The empty string now counts as no checkpoint: through Claim, through ClaimMany, and
// over the tombstone the owner's own Release leaves of such a record.
func TestLegacyEmptyCheckpointIsTakenOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	g, err := idem.New(e.store, "pay", idem.WithScope("review"))
	require.NoError(t, err)
	req := idem.Request{Key: "order-legacy"}
	sk, err := g.StoredKey(req)
	require.NoError(t, err)

	now := wallClock()
	rec := record(sk, now, "old-owner")
	rec.Fingerprint = ""
	rec.LeaseExpires = now.Add(-time.Minute) // the old owner crashed; its lease ended
	seed(t, e.store, rec)
	// The previous release's SetCheckpoint(ctx, key, "old-owner", ""): one UpdateItem of
	// the checkpoint, conditional on the token and the status.
	_, err = e.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(e.table),
		Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: sk}},
		UpdateExpression:          aws.String("SET checkpoint = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: ""}},
	})
	require.NoError(t, err)

	// Control: the same record without the empty checkpoint is taken over on DynamoDB.
	ctl := idem.Request{Key: "order-control"}
	csk, err := g.StoredKey(ctl)
	require.NoError(t, err)
	crec := record(csk, now, "old-owner")
	crec.Fingerprint = ""
	crec.LeaseExpires = now.Add(-time.Minute)
	seed(t, e.store, crec)
	ran0 := false
	_, _, err = idem.Do(ctx, g, ctl, func(ctx context.Context) (string, error) { ran0 = true; return "ok", nil })
	require.NoError(t, err)
	require.True(t, ran0, "control: taken over")

	// The same record on memstore: taken over, the handler runs.
	ms := memstore.New()
	mrec := *rec
	mrec.Checkpoint = ""
	ms.Put(mrec)
	gm, err := idem.New(ms, "pay", idem.WithScope("review"))
	require.NoError(t, err)
	ran := false
	_, _, err = idem.Do(ctx, gm, req, func(ctx context.Context) (string, error) { ran = true; return "ok", nil })
	require.NoError(t, err)
	require.True(t, ran, "memstore: the lease-ended record is taken over")

	ran = false
	_, _, err = idem.Do(ctx, g, req, func(ctx context.Context) (string, error) { ran = true; return "ok", nil })
	require.NoError(t, err, "dynamo: the lease-ended record of a crashed owner must be taken over, as on memstore")
	require.True(t, ran)

	// Through a batch claim, and over a release's tombstone: the same empty checkpoint.
	setEmpty := func(key string) {
		t.Helper()
		_, err := e.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(e.table),
			Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: key}},
			UpdateExpression:          aws.String("SET checkpoint = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: ""}},
		})
		require.NoError(t, err)
	}
	bk := sk + "/batch"
	brec := record(bk, now, "old-owner")
	brec.LeaseExpires = now.Add(-time.Minute)
	seed(t, e.store, brec)
	setEmpty(bk)
	res := e.store.ClaimMany(ctx, []*idemstore.Record{record(bk, now, "new-owner"), record(bk+"/other", now, "new-owner")}, now)
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Claimed, "batch claim: the lease-ended record with an empty checkpoint is taken over")

	rk := sk + "/release"
	seed(t, e.store, record(rk, now, "owner"))
	setEmpty(rk)
	require.NoError(t, e.store.Release(ctx, rk, "owner", now), "the owner releases a record with an empty checkpoint")
	_, claimed, err := e.store.Claim(ctx, record(rk, now, "next"), now)
	require.NoError(t, err)
	require.True(t, claimed, "the tombstone of a record with an empty checkpoint is taken over")
}
