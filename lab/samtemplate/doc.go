// Package samtemplate reads the SAM template of the examples (infra/template.yaml) and
// checks it: its functions, routes, queue, IAM grants and outputs agree with the code, and
// its tables agree with internal/samtables/tables.json, the copy from which tests and
// `make run` create their local tables. The template stays the one description of the
// tables; the copy only spares the library's tests a YAML reader.
//
// [Parse] accepts the CloudFormation short-form tags (!Ref, !GetAtt, !Sub, ...) and turns
// them into their long form ({"Ref": ...}, {"Fn::GetAtt": [...]}), so that a template reads
// as plain data. [Template.Table] gives a table's definition.
//
// Only what the examples use is modelled; this is not a general CloudFormation reader.
//
// See [intrinsic functions] for the intrinsic functions and [AWS::DynamoDB::Table] for the
// table properties.
//
// [intrinsic functions]: https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/intrinsic-function-reference.html
// [AWS::DynamoDB::Table]: https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-dynamodb-table.html
package samtemplate
