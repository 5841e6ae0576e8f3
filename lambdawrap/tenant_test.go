package lambdawrap_test

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/lambdawrap"
)

// setUserARN sets the IAM caller's ARN where each source carries it.
func (e *event) setUserARN(arn string) {
	if e.kind == kindREST {
		e.obj("requestContext", "identity")["userArn"] = arn
		return
	}
	e.obj("requestContext", "authorizer", "iam")["userArn"] = arn
}

// TestTenantIAM: an IAM caller is its user ARN, or for an assumed role the role's ARN
// without the session name, in every partition.
func TestTenantIAM(t *testing.T) {
	t.Parallel()
	tests := []struct{ fixture, want string }{
		{fixture: "apigw-rest-iam-assumed-role", want: "iam:arn:aws:sts::444455556666:assumed-role/invoice-worker"},
		{fixture: "apigw-rest-iam-user", want: "iam:arn:aws:iam::444455556666:user/integrations/partner-sync"},
		{fixture: "apigw-v2-iam", want: "iam:arn:aws:sts::111122223333:assumed-role/export-runner"},
		{fixture: "apigw-v2-iam-us-gov", want: "iam:arn:aws-us-gov:sts::123456789012:assumed-role/claims-processor"},
		{fixture: "function-url-post-with-key", want: "iam:arn:aws:sts::111122223333:assumed-role/webhook-relay"},
		{fixture: "function-url-iam-cn", want: "iam:arn:aws-cn:sts::210987654321:assumed-role/order-sync"},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, loadEvent(t, tc.fixture).defaultTenant(t))
		})
	}
}

// TestTenantIAMARNs: only the session name of an STS assumed-role ARN is dropped; every
// other ARN, and anything that is not one, is the tenant as it is.
func TestTenantIAMARNs(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, arn, want string }{
		{name: "assumed role", arn: "arn:aws:sts::111122223333:assumed-role/export-runner/task-0f3e", want: "arn:aws:sts::111122223333:assumed-role/export-runner"},
		{name: "assumed role, China", arn: "arn:aws-cn:sts::111122223333:assumed-role/r/s", want: "arn:aws-cn:sts::111122223333:assumed-role/r"},
		{name: "assumed role, GovCloud", arn: "arn:aws-us-gov:sts::111122223333:assumed-role/r/s", want: "arn:aws-us-gov:sts::111122223333:assumed-role/r"},
		{name: "assumed role with a path before the name", arn: "arn:aws:sts::111122223333:assumed-role/service/r/s", want: "arn:aws:sts::111122223333:assumed-role/service/r"},
		{name: "session name with an at sign", arn: "arn:aws:sts::111122223333:assumed-role/r/jane@example.com", want: "arn:aws:sts::111122223333:assumed-role/r"},
		{name: "assumed role without a session", arn: "arn:aws:sts::111122223333:assumed-role/r", want: "arn:aws:sts::111122223333:assumed-role/r"},
		{name: "empty role name", arn: "arn:aws:sts::111122223333:assumed-role//s", want: "arn:aws:sts::111122223333:assumed-role//s"},
		{name: "IAM user with a path", arn: "arn:aws:iam::111122223333:user/ops/alice", want: "arn:aws:iam::111122223333:user/ops/alice"},
		{name: "IAM role", arn: "arn:aws:iam::111122223333:role/service/r", want: "arn:aws:iam::111122223333:role/service/r"},
		{name: "root", arn: "arn:aws:iam::111122223333:root", want: "arn:aws:iam::111122223333:root"},
		{name: "federated user", arn: "arn:aws:sts::111122223333:federated-user/bob", want: "arn:aws:sts::111122223333:federated-user/bob"},
		{name: "assumed role of another service", arn: "arn:aws:iam::111122223333:assumed-role/r/s", want: "arn:aws:iam::111122223333:assumed-role/r/s"},
		{name: "not an ARN", arn: "sts::assumed-role/r/s", want: "sts::assumed-role/r/s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, fixture := range []string{"apigw-rest-iam-user", "apigw-v2-iam", "function-url-iam-cn"} {
				ev := loadEvent(t, fixture)
				ev.setUserARN(tc.arn)
				assert.Equal(t, "iam:"+tc.want, ev.defaultTenant(t), fixture)
			}
		})
	}
}

// TestTenantAssumedRoleSessions: the same service retrying from another task, instance or
// container (another session of its role) is the same tenant and gets the first response;
// another role is another tenant.
func TestTenantAssumedRoleSessions(t *testing.T) {
	t.Parallel()
	for _, fixture := range []string{"apigw-rest-iam-assumed-role", "apigw-v2-iam-us-gov", "function-url-iam-cn"} {
		t.Run(fixture, func(t *testing.T) {
			t.Parallel()
			ev := loadEvent(t, fixture)
			a := &app{}
			h := a.handler(t, ev.kind, memGuard(t))
			ctx := invokeCtx(t)
			partition := map[kind]string{kindREST: "aws", kindHTTPAPI: "aws-us-gov", kindFunctionURL: "aws-cn"}[ev.kind]
			role := "arn:" + partition + ":sts::111122223333:assumed-role/"

			ev.setUserARN(role + "worker/task-1")
			first := invoke(ctx, t, h, ev)
			require.NoError(t, first.err)
			require.Equal(t, 201, first.code)

			ev.setUserARN(role + "worker/task-2")
			retry := invoke(ctx, t, h, ev)
			require.NoError(t, retry.err)
			assert.Equal(t, "true", retry.header(lambdawrap.ReplayedHeader), "another session of the role")
			assert.Equal(t, first.body(t), retry.body(t))

			ev.setUserARN(role + "auditor/task-1")
			other := invoke(ctx, t, h, ev)
			require.NoError(t, other.err)
			assert.Empty(t, other.header(lambdawrap.ReplayedHeader), "another role")
			assert.Equal(t, int64(2), a.runs.Load())
		})
	}
}

// TestTenants: the same key from two callers is two records, and neither is ever replayed
// the other's response.
func TestTenants(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
		a := &app{}
		h := a.handler(t, ev.kind, newGuard(t, store))
		ctx := invokeCtx(t)
		bodies := map[string]string{}
		for _, tenant := range []string{"tenant-a", "tenant-b", "tenant-a", "tenant-b"} {
			ev.setTenant(tenant)
			r := invoke(ctx, t, h, ev)
			require.NoError(t, r.err)
			require.Equal(t, 201, r.code)
			if prev, seen := bodies[tenant]; seen {
				assert.Equal(t, "true", r.header(lambdawrap.ReplayedHeader))
				assert.Equal(t, prev, r.body(t), tenant)
				continue
			}
			assert.Empty(t, r.header(lambdawrap.ReplayedHeader), tenant)
			bodies[tenant] = r.body(t)
		}
		assert.Equal(t, int64(2), a.runs.Load())
		assert.NotEqual(t, bodies["tenant-a"], bodies["tenant-b"])
	})
}

// unidentifiedCases are requests that an authorizer or IAM authenticated but that carry no
// identity the decorators read: the fixtures of API Gateway's shapes as they arrive, and
// others edited to lose their identity.
var unidentifiedCases = []struct {
	name    string
	fixture string
	edit    func(e *event)
}{
	{name: "HTTP API Lambda authorizer, simple response", fixture: "apigw-v2-lambda-authorizer-simple-response"},
	{name: "HTTP API JWT authorizer, no sub claim", fixture: "apigw-v2-jwt-authorizer-without-sub"},
	{name: "REST API Lambda authorizer context, no principalId", fixture: "apigw-rest-lambda-authorizer-context",
		edit: func(e *event) { delete(e.obj("requestContext", "authorizer"), "principalId") }},
	{name: "REST API Cognito authorizer, no sub claim", fixture: "apigw-rest-cognito-claims",
		edit: func(e *event) { delete(e.obj("requestContext", "authorizer", "claims"), "sub") }},
	{name: "HTTP API IAM, no caller", fixture: "apigw-v2-iam",
		edit: func(e *event) { delete(e.obj("requestContext", "authorizer", "iam"), "userArn") }},
	{name: "function URL IAM, no caller", fixture: "function-url-iam-cn",
		edit: func(e *event) { delete(e.obj("requestContext", "authorizer", "iam"), "userArn") }},
}

// TestUnidentifiedCallerIsRefused: a request that is authenticated (an authorizer, JWT or
// IAM block is present) but carries no identity to scope its key by is refused with 500
// ProblemUnknownCaller, a configuration fault, instead of being scoped to the one empty
// tenant that every such caller would share. The handler does not run; each refusal is
// logged at ERROR and reported through OnUnguarded with ErrUnknownCaller.
func TestUnidentifiedCallerIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range unidentifiedCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := loadEvent(t, tc.fixture)
			if tc.edit != nil {
				tc.edit(ev)
			}
			var u unguardedHooks
			var logs logRecords
			a := &app{}
			h := a.handler(t, ev.kind, memGuard(t, idem.WithHooks(u.hooks()), idem.WithLogger(logs.logger())))
			for range 2 {
				r := invoke(invokeCtx(t), t, h, ev)
				require.NoError(t, r.err)
				assert.Equal(t, 500, r.code)
				assert.Equal(t, "application/problem+json", r.header("Content-Type"))
				assert.Equal(t, lambdawrap.ProblemUnknownCaller, r.problem(t)["type"])
			}
			assert.Equal(t, int64(0), a.runs.Load(), "the handler never runs")
			events := u.seen()
			require.Len(t, events, 2, "OnUnguarded calls")
			for _, e := range events {
				require.ErrorIs(t, e.Err, lambdawrap.ErrUnknownCaller)
				assert.Empty(t, e.Key)
			}
			assert.Equal(t, []string{"ERROR", "ERROR"}, logs.levels(t))
		})
	}
}

// TestAuthenticatedCallersNeverShareATenant: two users behind an HTTP API Lambda authorizer
// with simple responses ({"userId": ...}) send the same key. The second user must never be
// replayed the first user's response: by default both are refused (see
// TestUnidentifiedCallerIsRefused); with WithTenant reading the authorizer's userId, each
// is a tenant of its own, and each one's retry replays its own response.
func TestAuthenticatedCallersNeverShareATenant(t *testing.T) {
	t.Parallel()
	userID := func(e events.APIGatewayV2HTTPRequest) string {
		if a := e.RequestContext.Authorizer; a != nil {
			if id, ok := a.Lambda["userId"].(string); ok {
				return "user:" + id
			}
		}
		return ""
	}
	for _, tc := range []struct {
		name string
		opts []lambdawrap.HTTPAPIOption
	}{
		{name: "default tenant"},
		{name: "WithTenant", opts: []lambdawrap.HTTPAPIOption{lambdawrap.WithTenant(userID)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := &app{}
			fn, err := lambdawrap.HTTPAPI(memGuard(t), a.httpAPI, tc.opts...)
			require.NoError(t, err)
			h := invoker{h: fn}
			ctx := invokeCtx(t)
			ev := loadEvent(t, "apigw-v2-lambda-authorizer-simple-response")
			as := func(user string) response {
				ev.obj("requestContext", "authorizer", "lambda")["userId"] = user
				r := invoke(ctx, t, h, ev)
				require.NoError(t, r.err)
				return r
			}
			first := as("usr_alice")
			second := as("usr_bob")
			assert.Empty(t, second.header(lambdawrap.ReplayedHeader), "bob is not replayed alice's response")
			if first.code == 201 {
				assert.NotEqual(t, first.body(t), second.body(t), "bob is not replayed alice's response")
			}
			if tc.opts == nil {
				assert.Equal(t, 500, first.code)
				assert.Equal(t, 500, second.code)
				assert.Equal(t, int64(0), a.runs.Load())
				return
			}
			assert.Equal(t, 201, first.code)
			assert.Equal(t, 201, second.code)
			again := as("usr_alice")
			assert.Equal(t, "true", again.header(lambdawrap.ReplayedHeader))
			assert.Equal(t, first.body(t), again.body(t))
			assert.Equal(t, int64(2), a.runs.Load())
		})
	}
}
