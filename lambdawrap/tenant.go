package lambdawrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem/internal/jmespathkey"
)

// Tenant prefixes name where an identity came from. So an authorizer principal "alice"
// and an API key id "alice" stay two tenants.
const (
	tenantPrincipal = "principal:"
	tenantSub       = "sub:"
	tenantCognito   = "cognito:"
	tenantIAM       = "iam:"
	tenantAPIKey    = "apikey:"
	tenantCert      = "cert:"
)

// ErrUnknownCaller is reported when an HTTP decorator refuses an unidentified caller.
// The request is authenticated, but the decorator's default tenant reads no caller
// identity in it. Such requests include:
//
//   - an HTTP API Lambda authorizer with simple responses whose context has no principalId
//     or sub;
//   - a JWT without a sub claim;
//   - an IAM block without a caller;
//   - a mutual TLS client certificate without a subject DN;
//   - an authorizer's principalId or sub that is a number a float64 may not hold exactly
//     (see [TenantHTTPAPI]).
//
// Such callers would all share one tenant, so one could be replayed another's response.
// The request is answered 500 [ProblemUnknownCaller] instead, without running the handler.
// The refusal is logged at ERROR. It is reported through the guard's OnUnguarded hook,
// with an error wrapping ErrUnknownCaller. Say who the callers are with [WithTenant].
var ErrUnknownCaller = errors.New("lambdawrap: the request is authenticated but carries no caller identity to scope its key by")

// TenantREST returns the caller identity of an API Gateway REST API event.
// It is the first that is present of:
//
//   - the Lambda authorizer's principalId, prefixed "principal:";
//   - the Cognito user pool authorizer's claims.sub, prefixed "sub:";
//   - the Cognito identity id, prefixed "cognito:";
//   - the IAM caller's identity, prefixed "iam:";
//   - the mutual TLS client certificate (identity.clientCert) when no authorizer ran,
//     prefixed "cert:";
//   - the API key id, prefixed "apikey:".
//
// It returns "" when the event carries none. It is the default tenant of [REST]. [REST]
// refuses an event with an authorizer block but none of these (see [ErrUnknownCaller]).
//
// The client certificate's identity is its subject under its issuer (see
// [TenantHTTPAPI]). It comes before the API key. An API key identifies a usage plan's
// client but is no authentication: a key may be shared, and whoever holds it can send it.
//
// The Cognito identity id comes before the IAM caller. An identity pool's users all call
// through the pool's role: the id tells them apart, the role does not.
//
// The IAM caller's identity is its userArn, except for an assumed role. An assumed role's
// ARN is arn:aws:sts::<account>:assumed-role/<role>/<session>, in any partition. Its
// identity is the role's ARN without the session name. The session name changes with
// every ECS task, EC2 instance or Lambda container that assumes the role. And the same
// service retrying from another one must get the first response, not run again. Callers
// sharing a role are therefore one tenant. Where a role's sessions are different people,
// scope by session with [WithTenant]: IAM Identity Center permission sets, web identity
// federation. IAM users keep their full ARN.
//
// A numeric principalId or claims.sub is an identity only as an integer of magnitude
// below 2^53 (see [TenantHTTPAPI]). [REST] refuses any other number.
func TenantREST(e events.APIGatewayProxyRequest) string {
	t, _ := callerREST(e)
	return t
}

// callerREST is [TenantREST], with an error wrapping [ErrUnknownCaller] for an event that
// an authorizer authenticated but that carries no identity.
func callerREST(e events.APIGatewayProxyRequest) (string, error) {
	a := e.RequestContext.Authorizer
	s, ok := identityOf(a["principalId"])
	if !ok {
		return "", inexactIdentity("a REST API authorizer's principalId")
	}
	if s != "" {
		return tenantPrincipal + s, nil
	}
	if claims, ok := a["claims"].(map[string]any); ok {
		s, ok := identityOf(claims["sub"])
		if !ok {
			return "", inexactIdentity("a REST API authorizer's claims.sub")
		}
		if s != "" {
			return tenantSub + s, nil
		}
	}
	id := e.RequestContext.Identity
	switch {
	case id.CognitoIdentityID != "":
		return tenantCognito + id.CognitoIdentityID, nil
	case id.UserArn != "":
		return tenantIAM + iamIdentity(id.UserArn), nil
	}
	if c := id.ClientCert; c != nil && len(a) == 0 {
		// Without an authorizer: one that names no caller may tell apart callers who
		// share a certificate, so its event is refused below.
		if t, ok, err := callerCert(c.IssuerDN, c.SubjectDN, c.SerialNumber, c.ClientCertPem); ok {
			return t, err
		}
	}
	if id.APIKeyID != "" {
		return tenantAPIKey + id.APIKeyID, nil
	}
	if len(a) > 0 {
		return "", fmt.Errorf("%w: a REST API authorizer context without principalId or claims.sub", ErrUnknownCaller)
	}
	return "", nil
}

// TenantHTTPAPI returns the caller identity of an API Gateway HTTP API event.
// It is the first that is present of:
//
//   - the JWT authorizer's sub claim, prefixed "sub:";
//   - the Lambda authorizer context's principalId or sub, prefixed "principal:" or "sub:";
//   - the IAM caller's Cognito identity id, prefixed "cognito:";
//   - the IAM caller's identity, prefixed "iam:". It is the caller's userArn, or for an
//     assumed role the role's ARN without the session name (see [TenantREST]);
//   - for an event without an authorizer block, the mutual TLS client certificate
//     (authentication.clientCert), prefixed "cert:".
//
// It returns "" when the event carries none. It is the default tenant of [HTTPAPI] and of
// the [LocalHandler]'s events. [HTTPAPI] refuses an event with an authorizer block but
// none of these (see [ErrUnknownCaller]). Two such events need [WithTenant]: a Lambda
// authorizer with simple responses whose context names the user otherwise
// ({"userId": ...}), and a JWT without sub.
//
// API Gateway's mutual TLS verifies the client's certificate against the custom domain's
// truststore. It passes the certificate on in the event. Its identity is the certificate's
// subject DN under its issuer DN, each quoted, issuer first. Quoted, no pair of DNs reads
// as another:
//
//	cert:"CN=Partner CA,O=Example Corp,C=US" "CN=settlement.partner-a.example,O=Partner A,C=US"
//
// It is the subject, not the serial number. A renewed certificate is the same caller, and
// so is another of the caller's instances holding its own certificate. Its retry must get
// the first response rather than run again. Certificates that one issuer gives the same
// subject are therefore one tenant. Where an issuer names several parties alike, scope by
// serial number with [WithTenant].
//
// The tenant is only as distinct as the names the truststore's CAs give. Any CA trusted
// there can issue any subject, under whatever issuer name it gives itself. So a truststore
// holding CAs that callers control (each partner's own CA) needs [WithTenant]. The tenant
// must then come from what tells those callers apart. A certificate without a subject DN
// is refused (see [ErrUnknownCaller]). Its identity is in its subject alternative names,
// which the event does not carry.
//
// An authorizer's identity comes before the certificate's. An event whose authorizer names
// no caller is refused even with a certificate. The authorizer may tell apart callers who
// share one certificate: a partner's gateway calling for its users, say.
//
// A Lambda authorizer's context may hold numbers. aws-lambda-go decodes it into
// interface{}, so a numeric principalId or sub arrives as a float64:
//
//   - An integer of magnitude below 2^53 arrives exactly. Its tenant is fmt.Sprint of the
//     float64 ("principal:42", "principal:1.234567e+06").
//   - Two 64-bit ids beyond it (snowflake ids, database bigints) can arrive as one
//     float64, and so can two fractions. The two callers would be one tenant.
//
// The digits are gone before the decorator sees the event. So [HTTPAPI] refuses such an
// event (see [ErrUnknownCaller]), and TenantHTTPAPI returns "". There are three ways out:
//
//   - have the authorizer send such ids as strings;
//   - decode events with lambda.WithUseNumber (a json.Number keeps its digits);
//   - say who the caller is with [WithTenant].
func TenantHTTPAPI(e events.APIGatewayV2HTTPRequest) string {
	t, _ := callerHTTPAPI(e)
	return t
}

// callerHTTPAPI is [TenantHTTPAPI], with an error wrapping [ErrUnknownCaller] for an event
// that an authorizer authenticated but that carries no identity.
func callerHTTPAPI(e events.APIGatewayV2HTTPRequest) (string, error) {
	a := e.RequestContext.Authorizer
	if a == nil {
		c := e.RequestContext.Authentication.ClientCert
		t, _, err := callerCert(c.IssuerDN, c.SubjectDN, c.SerialNumber, c.ClientCertPem)
		return t, err
	}
	if a.JWT != nil && a.JWT.Claims["sub"] != "" {
		return tenantSub + a.JWT.Claims["sub"], nil
	}
	for _, f := range []struct{ field, prefix string }{{"principalId", tenantPrincipal}, {"sub", tenantSub}} {
		s, ok := identityOf(a.Lambda[f.field])
		if !ok {
			return "", inexactIdentity("an HTTP API Lambda authorizer context's " + f.field)
		}
		if s != "" {
			return f.prefix + s, nil
		}
	}
	if a.IAM != nil {
		if s := a.IAM.CognitoIdentity.IdentityID; s != "" {
			return tenantCognito + s, nil
		}
		if a.IAM.UserARN != "" {
			return tenantIAM + iamIdentity(a.IAM.UserARN), nil
		}
	}
	var what string
	switch {
	case a.JWT != nil:
		what = "a JWT authorizer's claims without sub"
	case a.IAM != nil:
		what = "an IAM authorizer block without userArn"
	case a.Lambda != nil:
		what = "a Lambda authorizer context without principalId or sub"
	default:
		what = "an empty authorizer block"
	}
	return "", fmt.Errorf("%w: an HTTP API event with %s", ErrUnknownCaller, what)
}

// TenantFunctionURL returns the caller identity of a Lambda function URL event.
// When the URL uses IAM auth, it is the IAM caller's identity, prefixed "iam:". That is
// the caller's userArn, or for an assumed role the role's ARN without the session name
// (see [TenantREST]). Otherwise it is "". It is the default tenant of [FunctionURL].
// [FunctionURL] refuses an event with an authorizer block but no userArn (see
// [ErrUnknownCaller]).
func TenantFunctionURL(e events.LambdaFunctionURLRequest) string {
	t, _ := callerFunctionURL(e)
	return t
}

// callerFunctionURL is [TenantFunctionURL], with an error wrapping [ErrUnknownCaller] for
// an event that IAM authenticated but that names no caller.
func callerFunctionURL(e events.LambdaFunctionURLRequest) (string, error) {
	a := e.RequestContext.Authorizer
	if a == nil {
		return "", nil
	}
	if a.IAM != nil && a.IAM.UserARN != "" {
		return tenantIAM + iamIdentity(a.IAM.UserARN), nil
	}
	return "", fmt.Errorf("%w: a function URL event with an authorizer block without userArn", ErrUnknownCaller)
}

// callerCert returns the tenant of the client certificate that API Gateway's mutual TLS
// verified. The certificate is given by its issuer DN, subject DN, serial number and PEM,
// as the event carries them. The tenant is "cert:" and the quoted issuer and subject DNs
// (see [TenantHTTPAPI]). ok is false when the event carries no certificate. err wraps
// [ErrUnknownCaller] for a certificate without a subject DN. Its identity is in its
// subject alternative names, which the event does not carry.
func callerCert(issuer, subject, serial, pem string) (tenant string, ok bool, err error) {
	switch {
	case issuer == "" && subject == "" && serial == "" && pem == "":
		return "", false, nil
	case subject == "":
		return "", true, fmt.Errorf("%w: a client certificate without a subject DN", ErrUnknownCaller)
	}
	// Quoted, each DN is delimited whatever characters it holds, so no issuer and subject
	// pair reads as another.
	return tenantCert + strconv.Quote(issuer) + " " + strconv.Quote(subject), true, nil
}

// iamIdentity returns the identity an IAM caller's ARN stands for.
//
//   - For an assumed role, arn:<partition>:sts::<account>:assumed-role/<role>/<session>,
//     it is the role, arn:<partition>:sts::<account>:assumed-role/<role>. The session name
//     changes with every ECS task, EC2 instance or Lambda container that assumes the role.
//     And the same service retrying from another one must get the first response rather
//     than run again. An assumed-role ARN carries the role's name, not its path. Should
//     anything come between, only the last segment, the session name, is dropped.
//   - Every other ARN is the identity as it is: IAM users, which keep their path;
//     federated users; the root. So is anything that is not an ARN.
//
// The partition may be any: aws, aws-cn, aws-us-gov, ...
func iamIdentity(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sts" {
		return arn
	}
	role, ok := strings.CutPrefix(parts[5], "assumed-role/")
	if !ok {
		return arn
	}
	i := strings.LastIndexByte(role, '/')
	if i <= 0 {
		return arn // no session name, or no role name before it
	}
	return arn[:len(arn)-len(role)+i]
}

// identityOf renders an authorizer context value as an identity.
// Authorizers may put numbers or booleans there as well as strings. It reports false for
// a value holding a number that does not arrive exactly. aws-lambda-go decodes an
// authorizer's context into interface{}. So a JSON number is a float64 by the time the
// event reaches the handler. Two 64-bit ids beyond 2^53 (snowflake ids, database bigints)
// can arrive as one float64, as can two fractions. Such a value names no one caller.
//
// Integers of magnitude below 2^53 arrive exactly. They keep the rendering they always
// had, fmt.Sprint of the float64 ("1.234567e+06" for 1234567): stored records are scoped
// by it. A json.Number (lambda.WithUseNumber) keeps its digits.
func identityOf(v any) (string, bool) {
	if !exactNumbers(v) {
		return "", false
	}
	switch v := v.(type) {
	case nil:
		return "", true
	case string:
		return v, true
	case json.Number, float64, bool:
		return fmt.Sprint(v), true
	default:
		b, _ := json.Marshal(v)
		return string(b), true
	}
}

// exactNumbers reports whether every float64 in v, a decoded JSON value, is exact.
// That is an integer of magnitude below 2^53, which a float64 holds exactly. 2^53 itself
// is not: 2^53+1 decodes to it too.
func exactNumbers(v any) bool {
	switch v := v.(type) {
	case float64:
		return v == math.Trunc(v) && math.Abs(v) < jmespathkey.MaxExactInt
	case map[string]any:
		for _, e := range v {
			if !exactNumbers(e) {
				return false
			}
		}
	case []any:
		for _, e := range v {
			if !exactNumbers(e) {
				return false
			}
		}
	}
	return true
}

// inexactIdentity is the error of an event whose identity, what, is a number that did not
// arrive exactly (see identityOf).
func inexactIdentity(what string) error {
	return fmt.Errorf("%w: %s is a number that may not have arrived exactly (an integer beyond 2^53 or a fraction); send it as a string", ErrUnknownCaller, what)
}
