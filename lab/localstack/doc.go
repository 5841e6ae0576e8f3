// Package localstack holds the lab's checks of the LocalStack deployment in the
// repository's localstack/ directory that need a YAML reader: the scripts' own tests stay
// beside them.
package localstack
