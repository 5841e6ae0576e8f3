package dynamotest

import "github.com/idemkit/idem/dynamo/dynamomem"

// MemStore is the in-memory stand-in for [dynamo.Store], now [dynamomem.Store]: this
// name is kept so that existing tests build. New code uses package dynamomem.
type MemStore = dynamomem.Store

// NewMemStore returns an empty MemStore, as [dynamomem.New] does.
func NewMemStore() *MemStore { return dynamomem.New() }
