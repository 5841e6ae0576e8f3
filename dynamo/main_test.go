package dynamo_test

import (
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/internal/ddblocal"
)

// The SDK client must keep satisfying the interfaces the package declares.
var (
	_ dynamo.API      = (*dynamodb.Client)(nil)
	_ dynamo.TableAPI = (*dynamodb.Client)(nil)
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }
