package dynamo

// ItemSize is itemSize for the external tests: the size DynamoDB counts for an item.
var ItemSize = itemSize

// ResultKey is resultKey for the external tests: the key of the item holding the result of
// key's record written under token.
var ResultKey = resultKey
