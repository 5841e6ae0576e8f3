// Package kinesispub publishes outbox messages (package outbox) to Amazon Kinesis Data
// Streams: an [outbox.Publisher] for the relays.
//
// Each message's Destination is a stream name or ARN. A record's partition key is the
// message's ordering key (see [PartitionKey]), so a key's records land on one shard, in
// the order the relay publishes them. Its data is the message's [outbox.Envelope]: a JSON
// object with the event id under "idempotencyKey" ([outbox.EnvelopeKey]), the type,
// ordering key and headers, and the payload under "payload" (or "payloadBase64" when it
// is not JSON). A Kinesis record has no attributes, so the id travels in the data.
//
// The consumer deduplicates on the event id: a record the relay publishes twice (its
// first answer lost) arrives with two sequence numbers but the same data, so the kinesis
// Lambda adapter keys on the data with kinesis.WithKeyJMESPath(outbox.EnvelopeKey); its
// default ordering group, the partition key, is the ordering key.
//
// Messages go out with PutRecords, up to 500 records and 5 MiB (data and partition keys)
// per call, calls to distinct streams one after another. A record over Kinesis's 1 MiB
// per record goes in a call of its own: Kinesis refuses that call as a whole, so the
// record fails alone and blocks only its ordering key. PutRecords keeps no order across
// a partial failure (a record after a failed one may be written), so a call holds at
// most one record per ordering key: a key's next record goes in a later call, once its
// previous one was written, and is held back (reported failed, not sent) when it failed.
// A relay hands one message per key per call anyway (see [outbox.Publisher]), so this
// costs it no call.
//
// See https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecords.html.
package kinesispub
