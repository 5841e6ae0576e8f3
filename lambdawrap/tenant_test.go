package lambdawrap_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
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
	{name: "HTTP API mutual TLS, a certificate without a subject", fixture: "apigw-v2-mtls",
		edit: func(e *event) { e.obj("requestContext", "authentication", "clientCert")["subjectDN"] = "" }},
	{name: "REST API mutual TLS, a certificate without a subject", fixture: "apigw-rest-mtls",
		edit: func(e *event) { delete(e.obj("requestContext", "identity", "clientCert"), "subjectDN") }},
	// The authorizer may tell apart callers who share a certificate (a partner's gateway
	// calling for its users): finding no identity in it, the decorator does not fall back
	// to the certificate.
	{name: "HTTP API Lambda authorizer, simple response, with a client certificate", fixture: "apigw-v2-lambda-authorizer-simple-response",
		edit: func(e *event) {
			e.obj("requestContext", "authentication", "clientCert")["subjectDN"] = "CN=gateway.partner-a.example,O=Partner A,C=US"
		}},
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

// TestNumericPrincipals: a Lambda authorizer's numeric principalId or sub, which
// aws-lambda-go decodes to a float64, is an identity only as an integer of magnitude below
// 2^53, which a float64 holds exactly; the tenant of such an integer is what it always
// was (records in the field are scoped by it). Beyond 2^53 (2^53 itself included: 2^53+1
// decodes to it too) or with a fraction, two callers can arrive as one float64, so the
// request is refused (TestReviewLargeNumericPrincipalsShareATenant) and the default tenant
// is "". A json.Number, which lambda.WithUseNumber gives, keeps its digits.
func TestNumericPrincipals(t *testing.T) {
	t.Parallel()
	const maxExact = 1<<53 - 1
	for _, tc := range []struct {
		name string
		id   any
		want string // the tenant when the id is the principalId; "" when refused
	}{
		{name: "small integer", id: float64(42), want: "42"},
		{name: "zero", id: float64(0), want: "0"},
		{name: "negative", id: float64(-7), want: "-7"},
		{name: "integer printed with an exponent", id: float64(1234567), want: "1.234567e+06"},
		{name: "largest exact integer", id: float64(maxExact), want: "9.007199254740991e+15"},
		{name: "smallest exact integer", id: float64(-maxExact), want: "-9.007199254740991e+15"},
		{name: "2^53", id: float64(1 << 53)},
		{name: "-2^53", id: float64(-(1 << 53))},
		{name: "64-bit id", id: float64(1234567890123456789)},
		{name: "fraction", id: 1.5},
		{name: "huge", id: 1e300},
		{name: "object holding a 64-bit id", id: map[string]any{"id": float64(1234567890123456789)}},
		{name: "list holding a fraction", id: []any{"a", 0.1}},
		{name: "object of exact numbers", id: map[string]any{"id": float64(42)}, want: `{"id":42}`},
		{name: "json.Number keeps its digits", id: json.Number("1234567890123456789"), want: "1234567890123456789"},
		{name: "string", id: "1234567890123456789", want: "1234567890123456789"},
		{name: "bool", id: true, want: "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, field := range []struct{ name, prefix string }{{"principalId", "principal:"}, {"sub", "sub:"}} {
				want := ""
				if tc.want != "" {
					want = field.prefix + tc.want
				}
				var v2 events.APIGatewayV2HTTPRequest
				v2.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
					Lambda: map[string]any{field.name: tc.id, "seats": float64(1 << 60)}}
				assert.Equal(t, want, lambdawrap.TenantHTTPAPI(v2), "HTTP API %s", field.name)
			}
			var rest events.APIGatewayProxyRequest
			rest.RequestContext.Authorizer = map[string]any{"principalId": tc.id, "integrationLatency": 0.5}
			want := ""
			if tc.want != "" {
				want = "principal:" + tc.want
			}
			assert.Equal(t, want, lambdawrap.TenantREST(rest), "REST principalId")
			rest.RequestContext.Authorizer = map[string]any{"claims": map[string]any{"sub": tc.id}}
			if tc.want != "" {
				want = "sub:" + tc.want
			}
			assert.Equal(t, want, lambdawrap.TenantREST(rest), "REST claims.sub")
		})
	}
}

// TestNumericPrincipalsWithUseNumber: a function whose authorizer sends 64-bit ids as
// numbers can keep their digits by decoding events with lambda.WithUseNumber (given to
// lambda.StartWithOptions): each id is
// then a tenant of its own, and each user's retry replays that user's response.
func TestNumericPrincipalsWithUseNumber(t *testing.T) {
	t.Parallel()
	a := &app{}
	fn, err := lambdawrap.HTTPAPI(memGuard(t), a.httpAPI)
	require.NoError(t, err)
	h := lambda.NewHandlerWithOptions(fn, lambda.WithUseNumber(true))
	ctx := invokeCtx(t)
	ev := loadEvent(t, "apigw-v2-lambda-authorizer")
	as := func(id string) response {
		ev.obj("requestContext", "authorizer", "lambda")["principalId"] = json.Number(id)
		out, err := h.Invoke(ctx, ev.payload(t))
		require.NoError(t, err)
		return decodeResponse(t, bytes.Clone(out))
	}
	first := as("1234567890123456789")
	second := as("1234567890123456700")
	assert.Equal(t, 201, second.code)
	assert.Empty(t, second.header(lambdawrap.ReplayedHeader), "another user is not replayed the first one's response")
	again := as("1234567890123456789")
	assert.Equal(t, "true", again.header(lambdawrap.ReplayedHeader))
	assert.Equal(t, first.body(t), again.body(t))
	assert.Equal(t, int64(2), a.runs.Load())
}

// setClientCert makes the event carry the client certificate that API Gateway's mutual TLS
// verified, where each API type carries it.
func (e *event) setClientCert(issuer, subject, serial string) {
	path := []string{"requestContext", "authentication", "clientCert"}
	if e.kind == kindREST {
		path = []string{"requestContext", "identity", "clientCert"}
	}
	c := e.obj(path...)
	c["issuerDN"], c["subjectDN"], c["serialNumber"] = issuer, subject, serial
}

// TestClientCertificateTenant: a caller that API Gateway's mutual TLS authenticated is
// the subject of its certificate under the certificate's issuer: a renewed certificate, or
// another of the caller's instances with its own certificate, is the same tenant (a retry
// sent with it replays), while another subject or another issuer is another tenant. An
// authorizer's identity comes before the certificate's; the certificate comes before an
// API key.
func TestClientCertificateTenant(t *testing.T) {
	t.Parallel()
	const (
		ca      = "CN=Example Partner CA,O=Example Corp,C=US"
		otherCA = "CN=Other Partner CA,O=Other Corp,C=DE"
		partner = "CN=settlement.partner-a.example,O=Partner A,C=US"
		other   = "CN=settlement.partner-b.example,O=Partner B,C=US"
	)
	type cert struct{ issuer, subject, serial string }
	for _, tc := range []struct {
		name        string
		fixture     string
		first, then cert
		edit        func(e *event) // applied before the second request
		same        bool           // one tenant: the second request replays the first
	}{
		{name: "HTTP API: another subject", fixture: "apigw-v2-mtls",
			first: cert{ca, partner, "96:7c:24"}, then: cert{ca, other, "f1:2c:b3"}},
		{name: "HTTP API: the same subject from another issuer", fixture: "apigw-v2-mtls",
			first: cert{ca, partner, "96:7c:24"}, then: cert{otherCA, partner, "96:7c:24"}},
		{name: "HTTP API: a renewed certificate", fixture: "apigw-v2-mtls",
			first: cert{ca, partner, "96:7c:24"}, then: cert{ca, partner, "0a:0b:0c"}, same: true},
		{name: "HTTP API: quoting keeps DNs apart", fixture: "apigw-v2-mtls",
			first: cert{`CN=A" "CN=B`, "CN=C", "01"}, then: cert{"CN=A", `CN=B" "CN=C`, "01"}},
		{name: "REST API: another subject", fixture: "apigw-rest-mtls",
			first: cert{ca, partner, "96:7c:24"}, then: cert{ca, other, "f1:2c:b3"}},
		{name: "REST API: a renewed certificate", fixture: "apigw-rest-mtls",
			first: cert{ca, partner, "96:7c:24"}, then: cert{ca, partner, "0a:0b:0c"}, same: true},
		{name: "REST API: the certificate before the API key", fixture: "apigw-rest-mtls-api-key",
			first: cert{ca, partner, "96:7c:24"}, then: cert{ca, other, "f1:2c:b3"}},
		{name: "HTTP API: the JWT authorizer's sub before the certificate", fixture: "apigw-v2-mtls-jwt-authorizer",
			first: cert{ca, partner, "96:7c:24"}, then: cert{ca, other, "f1:2c:b3"}, same: true},
		{name: "HTTP API: another JWT sub with the same certificate", fixture: "apigw-v2-mtls-jwt-authorizer",
			first: cert{ca, partner, "96:7c:24"}, then: cert{ca, partner, "96:7c:24"},
			edit: func(e *event) { e.obj("requestContext", "authorizer", "jwt", "claims")["sub"] = "u_other" }},
		{name: "REST API: the authorizer's principalId before the certificate", fixture: "apigw-rest-lambda-authorizer-context",
			first: cert{ca, partner, "96:7c:24"}, then: cert{ca, other, "f1:2c:b3"}, same: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := &app{}
			ev := loadEvent(t, tc.fixture)
			h := a.handler(t, ev.kind, memGuard(t))
			ctx := invokeCtx(t)
			ev.setClientCert(tc.first.issuer, tc.first.subject, tc.first.serial)
			first := invoke(ctx, t, h, ev)
			require.NoError(t, first.err)
			require.Equal(t, 201, first.code)
			firstTenant := ev.defaultTenant(t)
			require.NotEmpty(t, firstTenant)
			ev.setClientCert(tc.then.issuer, tc.then.subject, tc.then.serial)
			if tc.edit != nil {
				tc.edit(ev)
			}
			second := invoke(ctx, t, h, ev)
			require.NoError(t, second.err)
			require.Equal(t, 201, second.code)
			if tc.same {
				assert.Equal(t, firstTenant, ev.defaultTenant(t))
				assert.Equal(t, "true", second.header(lambdawrap.ReplayedHeader), "the same caller's retry replays")
				assert.Equal(t, first.body(t), second.body(t))
				assert.Equal(t, int64(1), a.runs.Load())
				return
			}
			assert.NotEqual(t, firstTenant, ev.defaultTenant(t))
			assert.Empty(t, second.header(lambdawrap.ReplayedHeader), "another caller is not replayed the first one's response")
			assert.Equal(t, int64(2), a.runs.Load())
		})
	}
}
