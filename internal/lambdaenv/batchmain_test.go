package lambdaenv

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type testEvent struct {
	Records []string `json:"records"`
}

type testResponse struct {
	Count int `json:"count"`
}

// countRecords is a batch handler that counts the event's records, and checks that it
// runs with a Lambda context.
func countRecords(ctx context.Context, e testEvent) (testResponse, error) {
	if _, ok := lambdacontext.FromContext(ctx); !ok {
		return testResponse{}, errors.New("no Lambda context")
	}
	if len(e.Records) == 0 {
		return testResponse{}, errors.New("empty batch")
	}
	return testResponse{Count: len(e.Records)}, nil
}

// ProcessLocal reads one event from the file its argument names, or from stdin (no
// argument, or "-"), and writes the handler's response as indented JSON; a usage error,
// an unreadable event and the handler's error fail it.
func TestProcessLocal(t *testing.T) {
	t.Parallel()
	event := []byte(`{"records": ["a", "b"]}`)
	file := filepath.Join(t.TempDir(), "event.json")
	require.NoError(t, os.WriteFile(file, event, 0o600))
	ctx := LocalContext(context.Background())
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		want  string // the output, or the error's text
		err   bool
	}{
		{name: "stdin", stdin: string(event), want: "{\n  \"count\": 2\n}\n"},
		{name: "dash", args: []string{"-"}, stdin: string(event), want: "{\n  \"count\": 2\n}\n"},
		{name: "file", args: []string{file}, want: "{\n  \"count\": 2\n}\n"},
		{name: "two arguments", args: []string{file, file}, err: true, want: "usage: example-test [event.json]"},
		{name: "missing file", args: []string{file + ".none"}, err: true, want: "no such file"},
		{name: "not JSON", stdin: "{", err: true, want: "read Test event: unexpected EOF"},
		{name: "handler error", stdin: `{"records": []}`, err: true, want: "empty batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := ProcessLocal(ctx, "example-test", "Test", countRecords, tc.args, strings.NewReader(tc.stdin), &out)
			if tc.err {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
				assert.Empty(t, out.String())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, out.String())
		})
	}
}

// RunBatch stops before it builds anything when a required variable is missing.
func TestRunBatchRequiresTables(t *testing.T) {
	t.Setenv("IDEM_TEST_TABLE", "")
	err := RunBatch("example-test", "Test", Logger(&bytes.Buffer{}), []string{"IDEM_TEST_TABLE"},
		func(Wiring) (func(context.Context, testEvent) (testResponse, error), error) {
			panic("wired without its tables")
		})
	var missing *MissingError
	require.ErrorAs(t, err, &missing)
	assert.Equal(t, []string{"IDEM_TEST_TABLE"}, missing.Names)
}
