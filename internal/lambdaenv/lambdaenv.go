// Package lambdaenv holds what the example functions in cmd/ share about their
// environment: whether they run inside AWS Lambda, their required variables, and the
// DynamoDB client configured the way the AWS SDK reads the environment.
//
// Configuration comes from the environment only, as on Lambda. Locally, the SDK's own
// AWS_ENDPOINT_URL_DYNAMODB points the client at DynamoDB Local; see
// https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html.
package lambdaenv

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// RuntimeAPI is the variable the Lambda runtime sets for the function's runtime client;
// without it a binary is not running inside Lambda.
const RuntimeAPI = "AWS_LAMBDA_RUNTIME_API"

// InLambda reports whether the process runs inside AWS Lambda (or its emulator).
func InLambda() bool {
	return os.Getenv(RuntimeAPI) != ""
}

// MissingError reports required environment variables that are unset or empty.
type MissingError struct {
	// Names lists the missing variables.
	Names []string
}

// Error lists the missing variables.
func (e *MissingError) Error() string {
	return "missing environment variable(s): " + strings.Join(e.Names, ", ")
}

// Require returns the values of the named environment variables, in order, or a
// [*MissingError] naming every one that is unset or empty.
func Require(names ...string) ([]string, error) {
	values := make([]string, len(names))
	var missing []string
	for i, name := range names {
		values[i] = os.Getenv(name)
		if values[i] == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, &MissingError{Names: missing}
	}
	return values, nil
}

// DynamoDB returns a DynamoDB client configured from the environment as the SDK does:
// AWS_REGION, the credential chain, and AWS_ENDPOINT_URL_DYNAMODB for a local endpoint.
// Create it once per process (container) and share it: it is safe for concurrent use and
// keeps its connections warm. It returns an error when no region is configured.
func DynamoDB(ctx context.Context) (*dynamodb.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, &MissingError{Names: []string{"AWS_REGION"}}
	}
	return dynamodb.NewFromConfig(cfg), nil
}
