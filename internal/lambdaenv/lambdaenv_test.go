package lambdaenv

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRequire(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    []string
		missing []string
	}{
		{name: "all set", env: map[string]string{"A_TABLE": "a", "B_TABLE": "b"}, want: []string{"a", "b"}},
		{name: "one missing", env: map[string]string{"A_TABLE": "a", "B_TABLE": ""}, missing: []string{"B_TABLE"}},
		{name: "all missing", env: map[string]string{"A_TABLE": "", "B_TABLE": ""}, missing: []string{"A_TABLE", "B_TABLE"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got, err := Require("A_TABLE", "B_TABLE")
			if tc.missing != nil {
				var missing *MissingError
				require.ErrorAs(t, err, &missing)
				assert.Equal(t, tc.missing, missing.Names)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestInLambda(t *testing.T) {
	t.Setenv(RuntimeAPI, "")
	assert.False(t, InLambda())
	t.Setenv(RuntimeAPI, "127.0.0.1:9001")
	assert.True(t, InLambda())
}

func TestDynamoDBNeedsRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_PROFILE", "")
	_, err := DynamoDB(context.Background(), slog.New(slog.DiscardHandler))
	var missing *MissingError
	require.ErrorAs(t, err, &missing)
	assert.Equal(t, []string{"AWS_REGION"}, missing.Names)

	t.Setenv("AWS_REGION", "eu-west-1")
	client, err := DynamoDB(context.Background(), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	assert.Equal(t, "eu-west-1", client.Options().Region)
}

func TestLocalEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		endpoint string
		local    bool
	}{
		{"http://127.0.0.1:8000", true},
		{"http://127.1.2.3:8000", true},
		{"http://localhost:8000", true},
		{"http://[::1]:8000", true},
		{"", false},
		{"https://dynamodb.eu-west-1.amazonaws.com", false},
		{"http://10.0.0.5:8000", false},
		{"http://localstack:4566", false},
		{"http://localhost.example.com:8000", false},
		{"127.0.0.1:8000", false}, // not a URL: the SDK would not use it either
		{"://bad", false},
	}
	for _, tc := range tests {
		t.Run(tc.endpoint, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.local, LocalEndpoint(tc.endpoint))
		})
	}
}

func TestChecksumValidationOffOnlyForALocalEndpoint(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ENDPOINT_URL", "")
	for endpoint, disabled := range map[string]bool{
		"":                      false,
		"http://127.0.0.1:8000": true,
		"https://dynamodb.eu-west-1.amazonaws.com": false,
	} {
		t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
		client, err := DynamoDB(context.Background(), slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		assert.Equal(t, disabled, client.Options().DisableValidateResponseChecksum, endpoint)
	}
}
