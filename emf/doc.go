// Package emf publishes idem's metrics to Amazon CloudWatch in the Embedded Metric Format
// (EMF): JSON documents written to the function's standard output, from which CloudWatch
// Logs extracts metrics without any client call, as Powertools for AWS Lambda's Metrics
// utility does.
//
// A [Recorder] collects what idem's hooks ([Recorder.Hooks]) report during an invocation:
// claims, completions, replays (from the store or the local cache), in-progress refusals,
// payload mismatches, lost leases (once per run), handler failures and other releases,
// store errors, and handler and run durations, each under the guard's operation
// ([DimensionOperation]); and the outcome of every SQS batch by status and failure
// reason. [Recorder.Flush] writes them as one EMF document per operation and starts over;
// [Wrap] flushes after every invocation of a Lambda handler. Counts are summed per flush;
// durations keep every observation (up to [MaxValues] per document, so that CloudWatch
// computes percentiles).
//
// Metrics never carry keys, message IDs or bodies: only counts and durations, under the
// fixed dimensions given to [New] (such as the service name) and the operation, so the
// number of metrics CloudWatch stores does not grow with traffic.
//
//	rec, err := emf.New(os.Stdout, "Credits", emf.WithDimension("Service", "credits"))
//	// ...
//	guard, err := idem.New(store, "credit-account", idem.WithHooks(rec.Hooks()))
//	// ...
//	h, err := sqs.New(guard, credit) // its batches report through the guard's hooks
//	// ...
//	lambda.Start(emf.Wrap(rec, h.Handle))
//
// See the specification,
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html,
// and Lambda's use of it,
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format.html.
package emf
