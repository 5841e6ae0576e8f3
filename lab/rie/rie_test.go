package rie

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/ledgertest"
	"github.com/idemkit/idem/internal/proctest"
	"github.com/idemkit/idem/internal/samtables"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// fixture reads a file of the repository (an event fixture of a testdata directory).
func fixture(t *testing.T, rel string) []byte {
	t.Helper()
	root, err := proctest.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	require.NoError(t, err)
	return data
}

// The version the package names is the one the Makefile installs.
func TestVersionIsTheMakefiles(t *testing.T) {
	makefile := fixture(t, "Makefile")
	m := regexp.MustCompile(`(?m)^RIE_VERSION := (\S+)$`).FindSubmatch(makefile)
	require.NotNil(t, m, "RIE_VERSION in the Makefile")
	assert.Equal(t, Version, string(m[1]))
}

// example is an example function of cmd/ running under the emulator on DynamoDB Local with
// fresh tables of infra/template.yaml.
type example struct {
	fn     *Function
	client *dynamodb.Client
	tables map[string]string
}

// startExample builds cmd/<name> as a Lambda bootstrap binary and starts it under the
// emulator, configured as infra/template.yaml configures it.
func startExample(t *testing.T, name string) *example {
	t.Helper()
	if _, err := locate(); err != nil { // before building and starting anything
		proctest.Unavailable(t, EnvRequire, err)
	}
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	tables := samtables.NewTables(t, client, "IdempotencyTable", "LedgerTable")
	bootstrap := proctest.BuildLambda(t, "github.com/idemkit/idem/cmd/"+name)
	fn := Start(t, bootstrap, proctest.Env(endpoint,
		"IDEMPOTENCY_TABLE="+tables["IdempotencyTable"], "LEDGER_TABLE="+tables["LedgerTable"],
		"AWS_LAMBDA_FUNCTION_NAME="+name, "AWS_LAMBDA_FUNCTION_TIMEOUT=60"))
	return &example{fn: fn, client: client, tables: tables}
}

// invoke posts an event as an event source mapping does and returns the item identifiers
// of the response's batchItemFailures, in the response's order.
func (e *example) invoke(t *testing.T, requestID string, event []byte) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status, body, err := e.fn.Invoke(ctx, requestID, event)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%s", body)
	// The response is the batch failure response Lambda reads, and nothing else.
	var resp struct {
		BatchItemFailures []struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&resp), "%s", body)
	failed := []string{}
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	return failed
}

// balances reads the balances of the ledger table, by account.
func (e *example) balances(t *testing.T) map[string]int64 {
	t.Helper()
	return ledgertest.Balances(t, e.client, e.tables["LedgerTable"], "account_id", "balance_cents")
}

// summary is the function's log line for one batch.
type summary struct {
	RequestID  string `json:"requestId"`
	Records    int    `json:"records"`
	Ran        int    `json:"ran"`
	Replayed   int    `json:"replayed"`
	Duplicates int    `json:"duplicates"`
	Failed     int    `json:"failed"`
}

// summary returns the function's batch summary line for the invocation requestID, which
// the function wrote through the emulator.
func (e *example) summary(t *testing.T, message, requestID string) summary {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(e.fn.Output()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"message":"`+message+`"`) || !strings.Contains(line, requestID) {
			continue
		}
		var s summary
		require.NoError(t, json.Unmarshal([]byte(line), &s), line)
		if s.RequestID == requestID {
			return s
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("no %q line of invocation %s in the output", message, requestID)
	return summary{}
}

// fromSequence returns the event of records from the one whose sequence number is seq
// on: what Lambda delivers again after the function reported seq as the first failure.
func fromSequence(t *testing.T, payload []byte, seq string) []byte {
	t.Helper()
	var ev events.DynamoDBEvent
	require.NoError(t, json.Unmarshal(payload, &ev))
	for i, r := range ev.Records {
		if r.Change.SequenceNumber == seq {
			ev.Records = ev.Records[i:]
			out, err := json.Marshal(ev)
			require.NoError(t, err)
			return out
		}
	}
	t.Fatalf("no record %s in the event", seq)
	return nil
}

// TestExampleStreamUnderEmulator runs cmd/example-stream, the orders table's DynamoDB
// Streams consumer of infra/template.yaml, as Lambda runs it: its bootstrap binary under
// the official Runtime Interface Emulator, invoked over HTTP with event fixtures. The
// response is the partial batch response, naming the first failure of each item; a
// redelivered batch replays what counted, from the store, and a delivery from the failed
// record on (Lambda's retry from its checkpoint) counts nothing twice.
func TestExampleStreamUnderEmulator(t *testing.T) {
	t.Parallel()
	e := startExample(t, "example-stream")
	const (
		invalid = "1111000000000000013" // the order without amount_cents
		message = "dynamostream: batch processed"
	)
	payload := fixture(t, "cmd/example-stream/testdata/dynamodb-orders-new.json")
	want := map[string]int64{"sales#sku-1": 800, "sales#sku-2": 700}

	assert.Equal(t, []string{invalid}, e.invoke(t, "first", payload))
	assert.Equal(t, want, e.balances(t))
	// Of six records, the invalid one failed; the other five ran (three INSERTs counted,
	// a MODIFY and a REMOVE counted nothing).
	assert.Equal(t, summary{RequestID: "first", Records: 6, Ran: 5, Failed: 1}, e.summary(t, message, "first"))

	assert.Equal(t, []string{invalid}, e.invoke(t, "again", payload))
	assert.Equal(t, want, e.balances(t), "the batch delivered again counts nothing twice")
	assert.Equal(t, summary{RequestID: "again", Records: 6, Replayed: 5, Failed: 1}, e.summary(t, message, "again"))

	retry := fromSequence(t, payload, invalid)
	assert.Equal(t, []string{invalid}, e.invoke(t, "retry", retry))
	assert.Equal(t, want, e.balances(t))
	assert.Equal(t, summary{RequestID: "retry", Records: 3, Replayed: 2, Failed: 1}, e.summary(t, message, "retry"))

	// dynamostream's fixture of three items: its INSERTs lack the example's sku, so each
	// fails; an item stops at its first failure, the only record of it reported, and its
	// later changes are not started.
	items := fixture(t, "dynamostream/testdata/dynamodb-orders-three-items.json")
	assert.Equal(t, []string{"4421584500000000017450439091", "4421584500000000017450439092", "4421584500000000017450439096"},
		e.invoke(t, "items", items))
	assert.Equal(t, summary{RequestID: "items", Records: 6, Failed: 6}, e.summary(t, message, "items"))
	assert.Equal(t, want, e.balances(t))
}

// TestExampleSQSUnderEmulator runs cmd/example-sqs under the emulator with its fixture:
// the duplicate transfer credits once, the invalid message is the batch item failure, and
// the batch delivered again credits nothing twice.
func TestExampleSQSUnderEmulator(t *testing.T) {
	t.Parallel()
	e := startExample(t, "example-sqs")
	const invalid = "f0e1d2c3-b4a5-4968-8778-695a4b3c2d64" // its amount is a string
	payload := fixture(t, "cmd/example-sqs/testdata/sqs-credits-with-duplicates.json")
	want := map[string]int64{"acct-1": 1000, "acct-2": 250}
	for _, id := range []string{"first", "again"} {
		assert.Equal(t, []string{invalid}, e.invoke(t, id, payload))
		assert.Equal(t, want, e.balances(t))
	}
}
