// Package samtemplate reads the SAM template of the examples (infra/template.yaml) so that
// tests and `make run` create their local tables from the same definitions that are
// deployed: the template is the one description of the tables, and the library's defaults
// cannot drift from it unnoticed.
//
// [Parse] accepts the CloudFormation short-form tags (!Ref, !GetAtt, !Sub, ...) and turns
// them into their long form ({"Ref": ...}, {"Fn::GetAtt": [...]}), so that a template reads
// as plain data. [Template.Table] gives a table's definition and its
// [dynamodb.CreateTableInput]; [Template.CreateTables] creates tables on DynamoDB Local.
//
// Only what the examples use is modelled; this is not a general CloudFormation reader.
//
// See https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/intrinsic-function-reference.html
// for the intrinsic functions and
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-dynamodb-table.html
// for the table properties.
package samtemplate
