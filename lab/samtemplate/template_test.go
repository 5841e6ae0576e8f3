package samtemplate

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/internal/samtables"
)

// The logical IDs the examples, the tests and `make run` rely on.
const (
	idempotencyTable = "IdempotencyTable"
	ordersTable      = "OrdersTable"
	ledgerTable      = "LedgerTable"
	apiFunction      = "ExampleAPIFunction"
	sqsFunction      = "ExampleSQSFunction"
	streamFunction   = "ExampleStreamFunction"
	streamMapping    = "ExampleStreamMapping"
	streamFailures   = "OrdersStreamFailureQueue"
	outboxTable      = "OutboxTable"
	relayFunction    = "OutboxRelayFunction"
	relayMapping     = "OutboxRelayMapping"
	relayFailures    = "OutboxStreamFailureQueue"
	eventsQueue      = "OrderEventsQueue"
	ledgerQueue      = "LedgerQueue"
	functionType     = "AWS::Serverless::Function"
	queueType        = "AWS::SQS::Queue"
	mappingType      = "AWS::Lambda::EventSourceMapping"
)

// function holds the properties of an AWS::Serverless::Function that the tests check.
type function struct {
	Runtime       string
	Handler       string
	Architectures []string
	Timeout       int
	Environment   struct{ Variables map[string]any }
	Policies      []any
	Events        map[string]struct {
		Type       string
		Properties map[string]any
	}
}

// queue holds the properties of an AWS::SQS::Queue that the tests check.
type queue struct {
	VisibilityTimeout      *int
	MessageRetentionPeriod *int
	RedrivePolicy          *struct {
		DeadLetterTargetArn any `json:"deadLetterTargetArn"`
		MaxReceiveCount     int `json:"maxReceiveCount"`
	}
}

// SQS defaults that apply when a queue leaves the property out.
const (
	defaultVisibilityTimeout = 30
	defaultRetention         = 4 * 24 * 3600
)

func loadTemplate(t *testing.T) *Template {
	t.Helper()
	tmpl, err := LoadRepo()
	require.NoError(t, err)
	return tmpl
}

func loadFunction(t *testing.T, tmpl *Template, id string) function {
	t.Helper()
	var f function
	require.NoError(t, tmpl.DecodeProperties(id, functionType, &f))
	return f
}

func loadQueue(t *testing.T, tmpl *Template, id string) queue {
	t.Helper()
	var q queue
	require.NoError(t, tmpl.DecodeProperties(id, queueType, &q))
	return q
}

func TestTemplateTables(t *testing.T) {
	t.Parallel()
	tmpl := loadTemplate(t)
	defaults := dynamo.DefaultAttributes()
	tests := []struct {
		name    string
		id      string
		hashKey string
		ttl     string
		stream  string // StreamViewType; "" for no stream
	}{
		// The idempotency table must match the store's defaults, or dynamo.New(client, table)
		// without options would not work against the deployed table.
		{name: "idempotency", id: idempotencyTable, hashKey: defaults.ID, ttl: defaults.Expiration},
		// example-stream reads each new order's image from the stream.
		{name: "orders", id: ordersTable, hashKey: "id", stream: "NEW_IMAGE"},
		{name: "ledger", id: ledgerTable, hashKey: "account_id"},
		// The outbox must be what dynamo.OutboxTableInput creates (checked below) and
		// expire on dynamo.OutboxExpirationAttr.
		{name: "outbox", id: outboxTable, hashKey: dynamo.OutboxOrderingKeyAttr, ttl: dynamo.OutboxExpirationAttr, stream: "NEW_IMAGE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tb, err := tmpl.Table(tc.id)
			require.NoError(t, err)
			assert.Equal(t, tc.hashKey, tb.HashKey())
			if tc.id != outboxTable {
				assert.Equal(t, []samtables.AttributeDefinition{{AttributeName: tc.hashKey, AttributeType: "S"}}, tb.AttributeDefinitions)
			}
			assert.Equal(t, tc.ttl, tb.TTLAttribute())
			assert.Equal(t, "PAY_PER_REQUEST", tb.BillingMode)
			if tc.stream == "" {
				assert.Nil(t, tb.StreamSpecification)
			} else if assert.NotNil(t, tb.StreamSpecification) {
				assert.Equal(t, tc.stream, tb.StreamSpecification.StreamViewType)
			}
			if assert.NotNil(t, tb.PointInTimeRecoverySpecification) {
				assert.True(t, tb.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled)
			}
			if assert.NotNil(t, tb.SSESpecification) {
				assert.True(t, tb.SSESpecification.SSEEnabled)
			}
			in, err := tb.CreateTableInput("x")
			require.NoError(t, err)
			assert.Equal(t, tc.hashKey, *in.KeySchema[0].AttributeName)
			if tc.id == outboxTable {
				want := dynamo.OutboxTableInput("x")
				assert.Equal(t, want.AttributeDefinitions, in.AttributeDefinitions)
				assert.Equal(t, want.KeySchema, in.KeySchema)
				assert.Equal(t, want.BillingMode, in.BillingMode)
				assert.Equal(t, want.StreamSpecification, in.StreamSpecification)
			}
		})
	}
	assert.ElementsMatch(t, []string{idempotencyTable, ordersTable, ledgerTable, outboxTable}, tmpl.LogicalIDs(TableType),
		"a new table needs its invariants here")
}

func TestTemplateFunctions(t *testing.T) {
	t.Parallel()
	tmpl := loadTemplate(t)
	tests := []struct {
		name string
		id   string
		env  map[string]string // variable → logical ID of the table it names
	}{
		{name: "api", id: apiFunction, env: map[string]string{"IDEMPOTENCY_TABLE": idempotencyTable, "ORDERS_TABLE": ordersTable}},
		{name: "sqs", id: sqsFunction, env: map[string]string{"IDEMPOTENCY_TABLE": idempotencyTable, "LEDGER_TABLE": ledgerTable}},
		{name: "stream", id: streamFunction, env: map[string]string{"IDEMPOTENCY_TABLE": idempotencyTable, "LEDGER_TABLE": ledgerTable}},
		{name: "relay", id: relayFunction, env: map[string]string{"IDEMPOTENCY_TABLE": idempotencyTable}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := loadFunction(t, tmpl, tc.id)
			assert.Equal(t, "provided.al2023", f.Runtime)
			assert.Equal(t, "bootstrap", f.Handler)
			assert.Equal(t, []string{"arm64"}, f.Architectures)
			assert.Positive(t, f.Timeout)
			assert.Equal(t, "makefile", tmpl.Resources[tc.id].Metadata["BuildMethod"])
			env := map[string]string{}
			for k, v := range f.Environment.Variables {
				id, ok := Ref(v)
				assert.True(t, ok, "%s should be a !Ref", k)
				env[k] = id
			}
			assert.Equal(t, tc.env, env)
		})
	}
	assert.ElementsMatch(t, []string{apiFunction, sqsFunction, streamFunction, relayFunction}, tmpl.LogicalIDs(functionType))
}

// TestTemplateBuildTargets checks that `sam build` finds the Makefile target of every
// function built with BuildMethod makefile, in the repository root (CodeUri "..").
func TestTemplateBuildTargets(t *testing.T) {
	t.Parallel()
	tmpl := loadTemplate(t)
	path, err := Find()
	require.NoError(t, err)
	root := filepath.Dir(filepath.Dir(path))
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	for _, id := range tmpl.LogicalIDs(functionType) {
		var f struct{ CodeUri string }
		require.NoError(t, tmpl.DecodeProperties(id, functionType, &f))
		assert.Equal(t, "..", f.CodeUri, id)
		assert.Regexp(t, regexp.MustCompile(`(?m)^build-`+id+`:`), string(makefile), id)
	}
}

// TestBuildTargetsNeedArtifactsDir checks that each function's build target, run without
// the ARTIFACTS_DIR that sam build sets, stops with a message instead of writing /bootstrap,
// and with it writes $(ARTIFACTS_DIR)/bootstrap. make -n prints the commands without
// building.
func TestBuildTargetsNeedArtifactsDir(t *testing.T) {
	t.Parallel()
	makeBin, err := exec.LookPath("make")
	require.NoError(t, err, "make runs every target of the repository")
	path, err := Find()
	require.NoError(t, err)
	root := filepath.Dir(filepath.Dir(path))
	tmpl := loadTemplate(t)
	for _, id := range tmpl.LogicalIDs(functionType) {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(makeBin, "-n", "-C", root, "build-"+id)
			cmd.Env = withoutEnv(os.Environ(), "ARTIFACTS_DIR")
			out, err := cmd.CombinedOutput()
			assert.Error(t, err, "%s", out)
			assert.Contains(t, string(out), "ARTIFACTS_DIR is not set")
			assert.NotContains(t, string(out), "go build")

			dir := t.TempDir()
			cmd = exec.Command(makeBin, "-n", "-C", root, "build-"+id, "ARTIFACTS_DIR="+dir)
			cmd.Env = withoutEnv(os.Environ(), "ARTIFACTS_DIR")
			out, err = cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Contains(t, string(out), `-o "`+dir+`/bootstrap"`)
		})
	}
}

// withoutEnv returns env without the variable name.
func withoutEnv(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func TestTemplateHTTPRoutes(t *testing.T) {
	t.Parallel()
	tmpl := loadTemplate(t)
	f := loadFunction(t, tmpl, apiFunction)
	var routes []string
	for name, ev := range f.Events {
		require.Equal(t, "HttpApi", ev.Type, name)
		api, _ := Ref(ev.Properties["ApiId"])
		assert.Equal(t, "OrdersAPI", api, name)
		routes = append(routes, ev.Properties["Method"].(string)+" "+ev.Properties["Path"].(string))
	}
	assert.ElementsMatch(t, []string{"POST /orders", "GET /orders/{id}"}, routes)
}

func TestTemplateQueue(t *testing.T) {
	t.Parallel()
	tmpl := loadTemplate(t)
	f := loadFunction(t, tmpl, sqsFunction)
	require.Len(t, f.Events, 1)
	var window int
	for _, ev := range f.Events {
		require.Equal(t, "SQS", ev.Type)
		id, attr, ok := GetAtt(ev.Properties["Queue"])
		require.True(t, ok)
		assert.Equal(t, ledgerQueue, id)
		assert.Equal(t, "Arn", attr)
		// Without it a single failed message makes Lambda redeliver the whole batch.
		assert.Contains(t, ev.Properties["FunctionResponseTypes"], "ReportBatchItemFailures")
		if w, ok := ev.Properties["MaximumBatchingWindowInSeconds"].(float64); ok {
			window = int(w)
		}
	}

	q := loadQueue(t, tmpl, ledgerQueue)
	visibility := defaultVisibilityTimeout
	if q.VisibilityTimeout != nil {
		visibility = *q.VisibilityTimeout
	}
	// Lambda's advice: at least six times the function timeout plus the batching window, so
	// that throttled retries of a batch do not see its messages reappear.
	assert.GreaterOrEqual(t, visibility, 6*f.Timeout+window)

	require.NotNil(t, q.RedrivePolicy, "the queue needs a dead-letter queue")
	dlqID, attr, ok := GetAtt(q.RedrivePolicy.DeadLetterTargetArn)
	require.True(t, ok, "deadLetterTargetArn should be !GetAtt <queue>.Arn")
	assert.Equal(t, "Arn", attr)
	assert.GreaterOrEqual(t, q.RedrivePolicy.MaxReceiveCount, 2, "a message deserves a retry before the DLQ")
	dlq := loadQueue(t, tmpl, dlqID)
	assert.Nil(t, dlq.RedrivePolicy)
	retention := func(q queue) int {
		if q.MessageRetentionPeriod == nil {
			return defaultRetention
		}
		return *q.MessageRetentionPeriod
	}
	// A message's age counts from its first enqueue, so the DLQ must keep messages longer.
	assert.Greater(t, retention(dlq), retention(q))
}

// storeActions returns the IAM actions the idem DynamoDB store needs, derived from the
// client methods it declares in dynamo.API. TransactWriteItems is no IAM action: each write
// in a transaction is authorised as its underlying action (the completion is an Update, so
// UpdateItem), see
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html.
// Nor is BatchExecuteStatement: each PartiQL statement is authorised as its own action.
// Only a batch consumer (the SQS function) makes those and BatchGetItem, so batch adds them.
func storeActions(batch bool) []string {
	api := reflect.TypeFor[dynamo.API]()
	var actions []string
	for i := range api.NumMethod() {
		switch name := api.Method(i).Name; name {
		case "TransactWriteItems":
		case "BatchExecuteStatement":
			if batch {
				actions = append(actions, "dynamodb:PartiQLInsert", "dynamodb:PartiQLUpdate")
			}
		case "BatchGetItem":
			if batch {
				actions = append(actions, "dynamodb:BatchGetItem")
			}
		default:
			actions = append(actions, "dynamodb:"+name)
		}
	}
	slices.Sort(actions)
	return actions
}

// inTransaction marks an action allowed only inside TransactWriteItems.
const inTransaction = " (in TransactWriteItems)"

func TestTemplateIAM(t *testing.T) {
	t.Parallel()
	tmpl := loadTemplate(t)
	tests := []struct {
		name string
		id   string
		want map[string][]string // table logical ID → sorted actions
	}{
		{name: "api", id: apiFunction, want: map[string][]string{
			idempotencyTable: storeActions(false),
			// GET /orders/{id} reads; the order is written only inside a transaction.
			ordersTable: {"dynamodb:GetItem", "dynamodb:PutItem" + inTransaction},
		}},
		{name: "sqs", id: sqsFunction, want: map[string][]string{
			// The SQS wrapper claims and completes whole batches with PartiQL statements.
			idempotencyTable: storeActions(true),
			// The ADD, only inside a transaction (IAM cannot require the record in it).
			ledgerTable: {"dynamodb:UpdateItem" + inTransaction},
		}},
		{name: "stream", id: streamFunction, want: map[string][]string{
			// The dynamostream adapter claims and completes whole batches, as sqs does.
			idempotencyTable: storeActions(true),
			ledgerTable:      {"dynamodb:UpdateItem" + inTransaction},
			// What the event source mapping reads the stream with, on the orders stream
			// alone (no SAM event: it would attach a managed policy on every stream).
			ordersTable + ".StreamArn": {"dynamodb:DescribeStream", "dynamodb:GetRecords",
				"dynamodb:GetShardIterator", "dynamodb:ListStreams"},
			// The on-failure destination.
			streamFailures + ".Arn": {"sqs:SendMessage"},
		}},
		{name: "relay", id: relayFunction, want: map[string][]string{
			// The relay's own records, claimed and completed in batches as dynamostream does;
			// nothing on the outbox table itself: the stream brings every item.
			idempotencyTable: storeActions(true),
			outboxTable + ".StreamArn": {"dynamodb:DescribeStream", "dynamodb:GetRecords",
				"dynamodb:GetShardIterator", "dynamodb:ListStreams"},
			// The events' destination queue and the on-failure destination, nothing else.
			eventsQueue + ".Arn":   {"sqs:SendMessage"},
			relayFailures + ".Arn": {"sqs:SendMessage"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := loadFunction(t, tmpl, tc.id)
			assert.Equal(t, tc.want, dynamoGrants(t, tmpl, f.Policies))
		})
	}
}

// dynamoGrants returns the actions that policies allow, by table logical ID, or by
// "<logical ID>.StreamArn" for a table's stream and "<logical ID>.Arn" for a queue. It fails
// t on anything it cannot audit: a managed policy or SAM policy template (which could grant
// more), a Deny, a wildcard, a DynamoDB action on anything but a table or its stream, or an
// action on a queue other than sqs:SendMessage.
func dynamoGrants(t *testing.T, tmpl *Template, policies []any) map[string][]string {
	t.Helper()
	grants := map[string][]string{}
	for _, p := range policies {
		doc, ok := p.(map[string]any)
		require.True(t, ok, "policy %v is not an inline policy document", p)
		statements, ok := doc["Statement"].([]any)
		require.True(t, ok, "policy %v is not an inline policy document", p)
		for _, s := range statements {
			st := s.(map[string]any)
			require.Equal(t, "Allow", st["Effect"])
			suffix := ""
			if cond, ok := st["Condition"]; ok {
				requireInTransaction(t, cond)
				suffix = inTransaction
			}
			for _, r := range list(st["Resource"]) {
				id, attr, ok := GetAtt(r)
				require.True(t, ok && (attr == "Arn" || attr == "StreamArn"), "resource %v is not a table's, stream's or queue's ARN", r)
				grantee, prefix := id, "dynamodb:"
				switch typ := tmpl.Resources[id].Type; {
				case typ == TableType && attr == "StreamArn":
					grantee = id + ".StreamArn"
				case typ == TableType:
				case typ == queueType && attr == "Arn":
					grantee, prefix = id+".Arn", "sqs:"
				default:
					t.Fatalf("resource %v: %s", r, typ)
				}
				for _, a := range list(st["Action"]) {
					action := a.(string)
					require.True(t, strings.HasPrefix(action, prefix), action)
					require.NotContains(t, action, "*")
					if prefix == "sqs:" {
						require.Equal(t, "sqs:SendMessage", action)
					}
					grants[grantee] = append(grants[grantee], action+suffix)
				}
			}
		}
	}
	for _, actions := range grants {
		slices.Sort(actions)
	}
	return grants
}

// requireInTransaction fails t unless cond is the one condition audited here: the write is
// part of a TransactWriteItems call. dynamodb:EnclosingOperation is a single-valued key, so
// the operator is plain StringEquals: IAM's documentation keeps the set qualifiers
// ForAnyValue and ForAllValues for multivalued keys (and ForAllValues would even match a
// request without the key).
func requireInTransaction(t *testing.T, cond any) {
	t.Helper()
	ops, ok := cond.(map[string]any)
	require.True(t, ok, "condition %v", cond)
	for op := range ops {
		require.NotContains(t, op, ":", "condition operator %s: no set qualifier on the single-valued dynamodb:EnclosingOperation", op)
	}
	require.Equal(t, map[string]any{"StringEquals": map[string]any{
		"dynamodb:EnclosingOperation": "TransactWriteItems",
	}}, cond, "the only condition audited here")
}

// list returns v as a list: IAM accepts a single value where a list is expected.
func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

func TestTemplateOutputs(t *testing.T) {
	t.Parallel()
	tmpl := loadTemplate(t)
	refs := map[string]string{
		"QueueURL":                    ledgerQueue,
		"IdempotencyTableName":        idempotencyTable,
		"OrdersTableName":             ordersTable,
		"LedgerTableName":             ledgerTable,
		"APIID":                       "OrdersAPI",
		"APIFunctionName":             apiFunction,
		"SQSFunctionName":             sqsFunction,
		"StreamFunctionName":          streamFunction,
		"StreamFailureQueueURL":       streamFailures,
		"OutboxTableName":             outboxTable,
		"OutboxRelayFunctionName":     relayFunction,
		"OrderEventsQueueURL":         eventsQueue,
		"OutboxStreamFailureQueueURL": relayFailures,
	}
	for name, id := range refs {
		out, ok := tmpl.Outputs[name]
		if assert.True(t, ok, name) {
			ref, _ := Ref(out.Value)
			assert.Equal(t, id, ref, name)
		}
	}
	require.Contains(t, tmpl.Outputs, "APIURL")
	sub, _ := tmpl.Outputs["APIURL"].Value.(map[string]any)["Fn::Sub"].(string)
	assert.Contains(t, sub, "${OrdersAPI}")
}

// mapping holds the properties of an AWS::Lambda::EventSourceMapping that the tests check.
type mapping struct {
	FunctionName               any
	EventSourceArn             any
	StartingPosition           string
	BatchSize                  int
	FunctionResponseTypes      []string
	BisectBatchOnFunctionError bool
	MaximumRetryAttempts       *int
	MaximumRecordAgeInSeconds  *int
	DestinationConfig          struct{ OnFailure struct{ Destination any } }
}

// TestTemplateStreamMapping checks the event source mappings on the orders and outbox
// streams: each reports partial failures (without that, one failed record makes Lambda
// retry the whole batch), bisects a batch that fails as a whole, gives up after bounded
// retries into an SQS destination, and is its function's only event (a SAM DynamoDB event
// would attach a managed policy that reads every stream).
func TestTemplateStreamMapping(t *testing.T) {
	t.Parallel()
	tmpl := loadTemplate(t)
	require.ElementsMatch(t, []string{streamMapping, relayMapping}, tmpl.LogicalIDs(mappingType))
	tests := []struct {
		mapping, function, table, failures string
	}{
		{streamMapping, streamFunction, ordersTable, streamFailures},
		{relayMapping, relayFunction, outboxTable, relayFailures},
	}
	for _, tc := range tests {
		t.Run(tc.mapping, func(t *testing.T) {
			t.Parallel()
			var m mapping
			require.NoError(t, tmpl.DecodeProperties(tc.mapping, mappingType, &m))
			fn, ok := Ref(m.FunctionName)
			require.True(t, ok)
			assert.Equal(t, tc.function, fn)
			id, attr, ok := GetAtt(m.EventSourceArn)
			require.True(t, ok)
			assert.Equal(t, tc.table+".StreamArn", id+"."+attr)
			assert.Contains(t, []string{"TRIM_HORIZON", "LATEST"}, m.StartingPosition)
			assert.Equal(t, []string{"ReportBatchItemFailures"}, m.FunctionResponseTypes)
			assert.True(t, m.BisectBatchOnFunctionError)
			// Both bounded: -1 or absent retries until the record expires (24 hours), blocking
			// its shard that long.
			if assert.NotNil(t, m.MaximumRetryAttempts) {
				assert.True(t, *m.MaximumRetryAttempts >= 1 && *m.MaximumRetryAttempts <= 10000, *m.MaximumRetryAttempts)
			}
			if assert.NotNil(t, m.MaximumRecordAgeInSeconds) {
				assert.True(t, *m.MaximumRecordAgeInSeconds >= 60 && *m.MaximumRecordAgeInSeconds < 24*3600, *m.MaximumRecordAgeInSeconds)
			}
			assert.True(t, m.BatchSize >= 1 && m.BatchSize <= 10000, m.BatchSize)
			dest, attr, ok := GetAtt(m.DestinationConfig.OnFailure.Destination)
			require.True(t, ok, "the on-failure destination should be !GetAtt <queue>.Arn")
			assert.Equal(t, tc.failures+".Arn", dest+"."+attr)
			q := loadQueue(t, tmpl, dest)
			if assert.NotNil(t, q.MessageRetentionPeriod) {
				assert.Equal(t, 14*24*3600, *q.MessageRetentionPeriod, "kept as long as SQS can")
			}
			assert.Empty(t, loadFunction(t, tmpl, tc.function).Events)

			// The idempotency records outlive the stream's 24 hours, so a record delivered
			// again always finds its key: the expiries are checked in cmd/example-stream and
			// cmd/outbox-relay.
			var table struct {
				StreamSpecification *struct{ StreamViewType string }
			}
			require.NoError(t, tmpl.DecodeProperties(tc.table, TableType, &table))
			require.NotNil(t, table.StreamSpecification)
		})
	}
}

// TestTemplateOutboxQueue checks the queue the relay publishes the example's events to: a
// FIFO queue, so each ordering key's events arrive in order (the relay sets the message
// group to the ordering key).
func TestTemplateOutboxQueue(t *testing.T) {
	t.Parallel()
	tmpl := loadTemplate(t)
	var q struct{ FifoQueue bool }
	require.NoError(t, tmpl.DecodeProperties(eventsQueue, queueType, &q))
	assert.True(t, q.FifoQueue)
}
