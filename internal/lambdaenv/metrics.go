package lambdaenv

import (
	"io"
	"os"

	"github.com/idemkit/idem/emf"
)

// MetricsNamespace is the CloudWatch namespace of the examples' metrics.
const MetricsNamespace = "idem-examples"

// Metrics returns the examples' metrics recorder: EMF documents on w under
// [MetricsNamespace], with one dimension, Service: the Lambda function's name
// (AWS_LAMBDA_FUNCTION_NAME), or fallback outside Lambda.
func Metrics(w io.Writer, fallback string) (*emf.Recorder, error) {
	service := os.Getenv("AWS_LAMBDA_FUNCTION_NAME")
	if service == "" {
		service = fallback
	}
	return emf.New(w, MetricsNamespace, emf.WithDimension("Service", service))
}
