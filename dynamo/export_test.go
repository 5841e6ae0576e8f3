package dynamo

// ItemSize is itemSize for the external tests: the size DynamoDB counts for an item.
var ItemSize = itemSize
