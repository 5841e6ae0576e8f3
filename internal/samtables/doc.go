// Package samtables creates the DynamoDB tables of the examples' SAM template
// (infra/template.yaml) on DynamoDB Local, for tests and `make run`. The definitions come
// from tables.json, the template's AWS::DynamoDB::Table properties as JSON, so that the
// library's tests need no YAML reader. The lab's samtemplate package checks that
// tables.json matches the template and rewrites it (go test ./samtemplate -update, in
// lab/).
//
// See [AWS::DynamoDB::Table] for the table properties.
//
// [AWS::DynamoDB::Table]: https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-dynamodb-table.html
package samtables
