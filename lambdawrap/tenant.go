package lambdawrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// Tenant prefixes name where an identity came from, so that, say, an authorizer principal
// "alice" and an API key id "alice" stay two tenants.
const (
	tenantPrincipal = "principal:"
	tenantSub       = "sub:"
	tenantCognito   = "cognito:"
	tenantIAM       = "iam:"
	tenantAPIKey    = "apikey:"
)

// ErrUnknownCaller is reported when an HTTP decorator refuses a request that is
// authenticated but carries no caller identity that the decorator's default tenant reads:
// an HTTP API Lambda authorizer with simple responses whose context has no principalId or
// sub, a JWT without a sub claim, an IAM block without a caller. Such callers would all
// share the empty tenant, so one could be replayed another's response; the request is
// answered 500 [ProblemUnknownCaller] instead, without running the handler, logged at
// ERROR, and reported through the guard's OnUnguarded hook with an error wrapping
// ErrUnknownCaller. Say who the callers are with [WithTenant].
var ErrUnknownCaller = errors.New("lambdawrap: the request is authenticated but carries no caller identity to scope its key by")

// TenantREST returns the caller identity of an API Gateway REST API event, the first that is
// present of: the Lambda authorizer's principalId, the Cognito user pool authorizer's
// claims.sub, the Cognito identity id, the IAM caller's identity, and the API key id. Each is
// prefixed with its kind ("principal:", "sub:", "cognito:", "iam:", "apikey:"). It returns ""
// when the event carries none. It is the default tenant of [REST], which refuses an event
// with an authorizer block but none of these (see [ErrUnknownCaller]).
//
// The Cognito identity id comes before the IAM caller because an identity pool's users
// all call through the pool's role: the id tells them apart, the role does not. The IAM
// caller's identity is its userArn, except for an assumed role
// (arn:aws:sts::<account>:assumed-role/<role>/<session>, in any partition): that is the
// role's ARN without the session name, since the session name changes with every ECS
// task, EC2 instance or Lambda container that assumes the role, and the same service
// retrying from another one must get the first response, not run again. Callers sharing
// a role are therefore one tenant; where a role's sessions are different people (IAM
// Identity Center permission sets, web identity federation), scope by session with
// [WithTenant]. IAM users keep their full ARN.
func TenantREST(e events.APIGatewayProxyRequest) string {
	t, _ := callerREST(e)
	return t
}

// callerREST is [TenantREST], with an error wrapping [ErrUnknownCaller] for an event that
// an authorizer authenticated but that carries no identity.
func callerREST(e events.APIGatewayProxyRequest) (string, error) {
	a := e.RequestContext.Authorizer
	if s := stringOf(a["principalId"]); s != "" {
		return tenantPrincipal + s, nil
	}
	if claims, ok := a["claims"].(map[string]any); ok {
		if s := stringOf(claims["sub"]); s != "" {
			return tenantSub + s, nil
		}
	}
	id := e.RequestContext.Identity
	switch {
	case id.CognitoIdentityID != "":
		return tenantCognito + id.CognitoIdentityID, nil
	case id.UserArn != "":
		return tenantIAM + iamIdentity(id.UserArn), nil
	case id.APIKeyID != "":
		return tenantAPIKey + id.APIKeyID, nil
	}
	if len(a) > 0 {
		return "", fmt.Errorf("%w: a REST API authorizer context without principalId or claims.sub", ErrUnknownCaller)
	}
	return "", nil
}

// TenantHTTPAPI returns the caller identity of an API Gateway HTTP API event, the first that
// is present of: the JWT authorizer's sub claim, the Lambda authorizer context's principalId
// or sub, the IAM caller's Cognito identity id, and the IAM caller's identity: its userArn,
// or for an assumed role the role's ARN without the session name (see [TenantREST]). Each
// is prefixed with its kind ("sub:", "principal:", "cognito:", "iam:"). It returns "" when
// the event carries none. It is the default tenant of [HTTPAPI] and of the
// [LocalHandler]'s events. [HTTPAPI] refuses an event with an authorizer block but none of
// these (see [ErrUnknownCaller]): a Lambda authorizer with simple responses whose context
// names the user otherwise ({"userId": ...}), or a JWT without sub, needs [WithTenant].
func TenantHTTPAPI(e events.APIGatewayV2HTTPRequest) string {
	t, _ := callerHTTPAPI(e)
	return t
}

// callerHTTPAPI is [TenantHTTPAPI], with an error wrapping [ErrUnknownCaller] for an event
// that an authorizer authenticated but that carries no identity.
func callerHTTPAPI(e events.APIGatewayV2HTTPRequest) (string, error) {
	a := e.RequestContext.Authorizer
	if a == nil {
		return "", nil
	}
	if a.JWT != nil && a.JWT.Claims["sub"] != "" {
		return tenantSub + a.JWT.Claims["sub"], nil
	}
	if s := stringOf(a.Lambda["principalId"]); s != "" {
		return tenantPrincipal + s, nil
	}
	if s := stringOf(a.Lambda["sub"]); s != "" {
		return tenantSub + s, nil
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

// TenantFunctionURL returns the caller identity of a Lambda function URL event: when the URL
// uses IAM auth, the IAM caller's identity, prefixed "iam:": its userArn, or for an assumed
// role the role's ARN without the session name (see [TenantREST]); else "". It is the
// default tenant of [FunctionURL], which refuses an event with an authorizer block but no
// userArn (see [ErrUnknownCaller]).
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

// iamIdentity returns the identity an IAM caller's ARN stands for. For an assumed role,
// arn:<partition>:sts::<account>:assumed-role/<role>/<session>, that is the role,
// arn:<partition>:sts::<account>:assumed-role/<role>: the session name changes with every
// ECS task, EC2 instance or Lambda container that assumes the role, and the same service
// retrying from another one must get the first response rather than run again. (An
// assumed-role ARN carries the role's name, not its path; should anything come between,
// only the last segment, the session name, is dropped.) Every other ARN (IAM users, which
// keep their path; federated users; the root) is the identity as it is, and so is
// anything that is not an ARN. The partition may be any: aws, aws-cn, aws-us-gov, ...
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

// stringOf renders an authorizer context value: authorizers may put numbers or booleans
// there as well as strings.
func stringOf(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case json.Number, float64, bool:
		return fmt.Sprint(v)
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}
