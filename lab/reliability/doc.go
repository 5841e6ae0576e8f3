// Package reliability holds no library code: its tests show how idem behaves when
// DynamoDB, the network, the clock or the process misbehave, against DynamoDB Local. See
// RELIABILITY.md at the repository root for what each test asserts.
package reliability
