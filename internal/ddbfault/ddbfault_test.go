package ddbfault

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
)

func TestUpdateStep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr string
		want Step
	}{
		{expr: "SET #status = :status, #v = :v REMOVE #lease", want: Complete},
		{expr: "SET #lease = :v", want: Extend},
		{expr: "SET #lease = :ended", want: Release},
		{expr: "SET #lease = :ended, #token = :released", want: Release},
		{expr: "SET #cp = :v", want: Checkpoint},
		{expr: "", want: Complete},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, UpdateStep(&dynamodb.UpdateItemInput{UpdateExpression: aws.String(tc.expr)}))
		})
	}
}

func TestBatchStep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stmt string
		want Step
	}{
		{stmt: `INSERT INTO "t" VALUE {'id': ?}`, want: Claim},
		{stmt: `UPDATE "t" SET "status" = ? REMOVE "in_progress_expiration" WHERE "id" = ? AND "lease_token" = ?`, want: Complete},
		{stmt: `UPDATE "t" SET "in_progress_expiration" = ? SET "lease_token" = ? WHERE "id" = ? AND "lease_token" = ? AND "status" = ?`, want: Release},
		{stmt: `SELECT * FROM "t"`, want: Get},
	}
	for _, tc := range tests {
		t.Run(tc.stmt, func(t *testing.T) {
			t.Parallel()
			in := &dynamodb.BatchExecuteStatementInput{Statements: []types.BatchStatementRequest{{Statement: aws.String(tc.stmt)}}}
			assert.Equal(t, tc.want, BatchStep(in))
		})
	}
}

func TestOperation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, chunk, want string
	}{
		{name: "request head", chunk: "POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.PutItem\r\n\r\n{}", want: "PutItem"},
		{name: "body only", chunk: `{"TableName":"t"}`},
		{name: "header cut short", chunk: "X-Amz-Target: DynamoDB_20120810.Put"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, operation([]byte(tc.chunk)))
		})
	}
}

func TestFaultErrors(t *testing.T) {
	t.Parallel()
	for _, f := range Faults {
		assert.ErrorContains(t, f.Err("PutItem"), "injected", string(f))
	}
	assert.True(t, ResponseLost.Applied())
	assert.False(t, Throttle.Applied())
}
