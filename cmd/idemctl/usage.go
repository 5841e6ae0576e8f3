package main

// usage is the help text: what each command does, costs and changes.
const usage = `idemctl inspects and repairs idem's idempotency records in DynamoDB.

Usage:
  idemctl show    [table flags] (--scope S --operation O --key K [--tenant T] | --stored-key S.O#HASH) [--json]
  idemctl find    [table flags] --key K [--tenant T] [--scope S [--operation O]] [--json]
  idemctl list    [table flags] [--state in-progress|lease-ended|all] [--scope S [--operation O]] [--limit N] [--json]
  idemctl release [table flags] (--scope S --operation O --key K [--tenant T] | --stored-key S.O#HASH) [--token PREFIX] [--yes] [--json]
  idemctl delete  [table flags] (--scope S --operation O --key K [--tenant T] | --stored-key S.O#HASH) [--token PREFIX] [--yes] [--json]
  idemctl outbox lag --store postgres://USER@HOST/DB [--table T] [--json]

Commands:
  show     Read one record (one strongly consistent GetItem) and print its status, lease end,
           owner token prefix, checkpoint, expiry, result size and encoding.
  find     Find the records of a raw key (and tenant) without knowing the scope or the
           operation: Scan the table's keys, compute the stored key the raw key has under
           each scope and operation they name (<scope>.<operation>, before the '#'), and
           read each record the Scan met (one strongly consistent GetItem each). It prints
           each record found with its scope and operation, then on stderr the key
           prefixes met, the items scanned and the read units the Scan and the reads
           consumed. The stored key hashes the tenant with the key: a key the HTTP
           wrappers scoped by the caller is found only with --tenant. --scope and
           --operation keep the stored keys of one scope or operation, but the Scan still
           reads (and bills) every item of the table. The raw key is never printed.
  list     List the in-progress records: in-progress (the lease runs, or the record has no
           lease end) and lease-ended (the owner's lease ended and nobody retried; the next
           request takes the key over). Expired records count as absent and are left out, and
           so does the tombstone a release leaves without a checkpoint (owner token
           "released:…").
           --scope keeps the records of one scope (every operation of it), --operation
           those of one operation of the scope.
           This is a Scan of the whole table, filtered, page by page until --limit records
           (default 100) are found: it costs read units for every item scanned, whatever the
           filter keeps, and the count is printed at the end.
  release  End the lease of an in-progress record whose owner is known dead, so that the
           next request takes the key over at once and resumes from its checkpoint. The
           record, its checkpoint and fingerprint stay; the owner's token is replaced, so
           an owner that was only hung has its next heartbeat, checkpoint or completion
           refused and cannot take the lease back. (An UpdateItem of the lease end and
           token.)
           A lease that has already ended needs no release: the next request takes over.
  delete   Delete a completed or failed record, so that the next request with the key runs
           the handler again. (A DeleteItem.)
  outbox lag
           Print the outbox's lag: how many events wait to be published, the oldest one's
           age (by the database clock from its commit), and the oldest event (id,
           ordering key, destination, type, failed publishes, last error), which heads its
           ordering key. PostgreSQL only: idemctl runs idemctl-pg (pgstore/cmd/idemctl-pg,
           found beside idemctl or on PATH) with the same arguments; --table names the
           idempotency table (the outbox is T_outbox, default idempotency_outbox), and
           exit codes are these. On DynamoDB the lag is the relay's: the relay function's
           IteratorAge metric and the relay's lag hook, which it explains (exit 2).

Read-only unless release or delete. Those print the record first, refuse a record they do
not apply to, and ask you to type yes on the terminal; --yes skips the question, and without
--yes they refuse to run when stdin is not a terminal. The change is conditional on the
record being as shown (status, owner token, lease end, checkpoint, expiry): if anything
wrote it since, nothing is written and idemctl says so. --token PREFIX also requires the
owner token to start with PREFIX, as an earlier show printed it.

Stored values (checkpoints, keys, owner tokens, encodings) are printed as they are when
plain, and Go-quoted otherwise: one with a space, quote, backslash or any character a
terminal could obey (control characters, bidi overrides, invalid bytes) shows escaped, in
quotes, so a record never writes to your terminal. --json escapes the same characters as
\u sequences.

Naming the record:
  --scope S       the guard's scope (idem.WithScope; by default the Lambda function's name)
  --operation O   the guard's operation, the name given to idem.New
  --key K         the caller's raw idempotency key (Idempotency-Key header, SQS attribute, ...)
  --tenant T      the caller identity the HTTP wrappers scoped the key by, with its kind
                  prefix as lambdawrap derives it ("sub:...", "iam:arn:...", "principal:...")
  --stored-key K  the stored key itself, <scope>.<operation>#<sha256 hex>, as logs and list
                  print it

Table flags:
  --table NAME           the idempotency table (default $IDEMPOTENCY_TABLE)
  --store dynamodb://NAME  the same, as a store URL
  --endpoint URL         DynamoDB endpoint (default $AWS_ENDPOINT_URL_DYNAMODB, else AWS's)
  --sort-key A --partition V  a table with a composite key: records under partition V,
                         the record key in sort key attribute A (dynamo.WithSortKey)
  Region and credentials come from the AWS SDK's configuration (AWS_REGION, AWS_PROFILE, ...).

Exit codes: 0 done, 1 DynamoDB or configuration failed, 2 bad command line (or a change
without --yes and no terminal), 3 no record under the key (find: under any scope and
operation; stderr then says the scope, operation and tenant looked under and what to try
next: find, list), 4 refused (not confirmed, not applicable, token prefix differs, or
the record changed since it was shown).
`
