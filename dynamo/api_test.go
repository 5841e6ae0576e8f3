package dynamo_test

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem/dynamo"
)

// The SDK client must keep satisfying the interfaces the package declares.
var (
	_ dynamo.API      = (*dynamodb.Client)(nil)
	_ dynamo.TableAPI = (*dynamodb.Client)(nil)
)
