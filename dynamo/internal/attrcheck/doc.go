// Package attrcheck refuses, as DynamoDB does before it runs a request, the attribute
// values and names of a write that DynamoDB would answer with a ValidationException: a
// number it cannot parse or store, an empty or duplicated set, an empty attribute name, an
// empty string or binary key value, a NULL that is not true. Package dynamo checks the
// writes attached to a completion with it at idem.Attach, and package dynamomem's
// in-memory tables do too, so that a write refused in production is refused in memory,
// at the same point. Each rule is tested against DynamoDB Local
// (dynamomem's TestAttachValidationAsOnDynamoDB). The shape of attached writes is checked
// here once for both: [AppendAttached] and [Action].
//
// See DynamoDB's [naming rules and data types] and [service quotas] for the rules.
//
// [naming rules and data types]: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html
// [service quotas]: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html
package attrcheck
