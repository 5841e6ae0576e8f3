// Package bench runs the end-to-end workloads of BENCHMARKS.md against any idempotency
// store: W1 (new keys), W2 (replays) and W3 (contention on one key) through [idem.Do], and
// W4 and W4b (SQS batches) through the sqs handler. The DynamoDB-only raw-SDK floor (X1,
// X2) is written by its caller with [Bench.Sequential], so that every workload is measured
// the same way.
//
// One [Meter] measures every workload on every store: wall time and latency percentiles
// (nearest-rank), the client's CPU (getrusage), the store server's CPU (its process and
// its children, from /proc), the rest of the machine's, and the requests the store client
// sends, which each store's client reports to the meter ([Meter.Call]). Every figure is
// rounded the same way ([Result]). A [Bench] prints one JSON line per workload.
package bench
