package lambdaenv

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/jsonlines"
	"github.com/idemkit/idem/internal/proctest"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

func invocation(id string) context.Context {
	return lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
}

func TestLoggerLines(t *testing.T) {
	tests := []struct {
		name  string
		level string
		log   func(l *slog.Logger)
		want  []map[string]any
	}{
		{
			name:  "request ID from the invocation",
			level: "",
			log: func(l *slog.Logger) {
				l.InfoContext(invocation("req-1"), "hello", "n", 1)
				l.With("component", "ledger").WithGroup("g").WarnContext(invocation("req-2"), "careful", "x", "y")
				l.Info("no invocation")
			},
			want: []map[string]any{
				{"level": "INFO", "message": "hello", "n": 1.0, RequestIDKey: "req-1"},
				{"level": "WARN", "message": "careful", "component": "ledger", "g": map[string]any{"x": "y", RequestIDKey: "req-2"}},
				{"level": "INFO", "message": "no invocation"},
			},
		},
		{
			name:  "level from Lambda's logging controls",
			level: "WARN",
			log: func(l *slog.Logger) {
				l.InfoContext(invocation("req-1"), "dropped")
				l.WarnContext(invocation("req-1"), "kept")
			},
			want: []map[string]any{{"level": "WARN", "message": "kept", RequestIDKey: "req-1"}},
		},
		{
			name:  "debug",
			level: "DEBUG",
			log:   func(l *slog.Logger) { l.DebugContext(invocation("req-1"), "detail") },
			want:  []map[string]any{{"level": "DEBUG", "message": "detail", RequestIDKey: "req-1"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(LogLevelVar, tc.level)
			var out bytes.Buffer
			tc.log(Logger(&out))
			lines := jsonlines.Parse(t, out.Bytes())
			require.Len(t, lines, len(tc.want))
			for i, l := range lines {
				assert.NotEmpty(t, l["timestamp"])
				delete(l, "timestamp")
				assert.Equal(t, tc.want[i], l)
			}
		})
	}
}

func TestSDKLogger(t *testing.T) {
	t.Setenv(LogLevelVar, "DEBUG")
	var out bytes.Buffer
	var l logging.Logger = sdkLogger{l: Logger(&out)}
	logging.WithContext(invocation("req-9"), l).Logf(logging.Warn, "retrying %s", "PutItem")
	l.Logf(logging.Debug, "no context")
	lines := jsonlines.Parse(t, out.Bytes())
	require.Len(t, lines, 2)
	assert.Equal(t, "WARN", lines[0]["level"])
	assert.Equal(t, "aws sdk: retrying PutItem", lines[0]["message"])
	assert.Equal(t, "req-9", lines[0][RequestIDKey])
	assert.Equal(t, "DEBUG", lines[1]["level"])
}

func TestLocalContextCarriesARequestID(t *testing.T) {
	a, ok := lambdacontext.FromContext(LocalContext(context.Background()))
	require.True(t, ok)
	b, _ := lambdacontext.FromContext(LocalContext(context.Background()))
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, a.AwsRequestID)
	assert.NotEqual(t, a.AwsRequestID, b.AwsRequestID)
}

// Against DynamoDB Local, a conditional write that fails (every replay, every 409) made the
// SDK log "failed to close HTTP response body ... response did not match expected checksum"
// (aws/aws-sdk-go-v2#3545): nothing is wrong, and the client built here says nothing.
func TestLocalEndpointLogsNoChecksumWarning(t *testing.T) {
	proctest.Setenv(t, ddblocal.Endpoint(t))
	t.Setenv(LogLevelVar, "")

	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(invocation("req-1"), 30*time.Second)
	defer cancel()
	client, err := DynamoDB(ctx, Logger(&out))
	require.NoError(t, err)
	table := ddblocal.NewTable(t, client)
	put := &dynamodb.PutItemInput{
		TableName:           aws.String(table),
		Item:                map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k"}},
		ConditionExpression: aws.String("attribute_not_exists(id)"),
	}
	_, err = client.PutItem(ctx, put)
	require.NoError(t, err)
	for range 3 {
		_, err = client.PutItem(ctx, put)
		var failed *types.ConditionalCheckFailedException
		require.True(t, errors.As(err, &failed), "want a conditional check failure, got %v", err)
	}

	assert.NotContains(t, out.String(), "checksum")
	assert.NotContains(t, out.String(), "failed to close")
	jsonlines.Parse(t, out.Bytes())
}
