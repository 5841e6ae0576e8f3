package lambdawrap

import (
	"encoding/json"
	"fmt"

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

// TenantREST returns the caller identity of an API Gateway REST API event, the first that is
// present of: the Lambda authorizer's principalId, the Cognito user pool authorizer's
// claims.sub, the Cognito identity id, the IAM caller's userArn, and the API key id. Each is
// prefixed with its kind ("principal:", "sub:", "cognito:", "iam:", "apikey:"). It returns ""
// when the event carries none. It is the default tenant of [REST].
func TenantREST(e events.APIGatewayProxyRequest) string {
	a := e.RequestContext.Authorizer
	if s := stringOf(a["principalId"]); s != "" {
		return tenantPrincipal + s
	}
	if claims, ok := a["claims"].(map[string]any); ok {
		if s := stringOf(claims["sub"]); s != "" {
			return tenantSub + s
		}
	}
	id := e.RequestContext.Identity
	switch {
	case id.CognitoIdentityID != "":
		return tenantCognito + id.CognitoIdentityID
	case id.UserArn != "":
		return tenantIAM + id.UserArn
	case id.APIKeyID != "":
		return tenantAPIKey + id.APIKeyID
	}
	return ""
}

// TenantHTTPAPI returns the caller identity of an API Gateway HTTP API event, the first that
// is present of: the JWT authorizer's sub claim, the Lambda authorizer context's principalId
// or sub, the IAM caller's Cognito identity id, and the IAM caller's userArn. Each is
// prefixed with its kind ("sub:", "principal:", "cognito:", "iam:"). It returns "" when the
// event carries none. It is the default tenant of [HTTPAPI] and of the [LocalHandler]'s
// events.
func TenantHTTPAPI(e events.APIGatewayV2HTTPRequest) string {
	a := e.RequestContext.Authorizer
	if a == nil {
		return ""
	}
	if a.JWT != nil && a.JWT.Claims["sub"] != "" {
		return tenantSub + a.JWT.Claims["sub"]
	}
	if s := stringOf(a.Lambda["principalId"]); s != "" {
		return tenantPrincipal + s
	}
	if s := stringOf(a.Lambda["sub"]); s != "" {
		return tenantSub + s
	}
	if a.IAM != nil {
		if s := a.IAM.CognitoIdentity.IdentityID; s != "" {
			return tenantCognito + s
		}
		if a.IAM.UserARN != "" {
			return tenantIAM + a.IAM.UserARN
		}
	}
	return ""
}

// TenantFunctionURL returns the caller identity of a Lambda function URL event: the IAM
// caller's userArn, prefixed "iam:", when the URL uses IAM auth, else "". It is the default
// tenant of [FunctionURL].
func TenantFunctionURL(e events.LambdaFunctionURLRequest) string {
	if a := e.RequestContext.Authorizer; a != nil && a.IAM != nil && a.IAM.UserARN != "" {
		return tenantIAM + a.IAM.UserARN
	}
	return ""
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
