package dynamomem_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem/dynamo/dynamomem"
	"github.com/idemkit/idem/dynamo/dynamotest"
)

// TestChargeInMemory and TestChargeOnDynamoDBLocal are the tests Example shows.

func TestChargeInMemory(t *testing.T) {
	store := dynamomem.New()
	if _, err := store.CreateTable(context.Background(), paymentsTable()); err != nil {
		t.Fatal(err)
	}
	testCharge(t, store, store, "payments")
}

func TestChargeOnDynamoDBLocal(t *testing.T) {
	client := dynamotest.Client(t)
	table := dynamotest.CreateTable(t, client, paymentsTable()) // "payments-<random>"
	testCharge(t, dynamotest.NewStore(t), client, table)
}
