// Package streamseq compares the sequence numbers of stream records (DynamoDB Streams,
// Kinesis): decimal strings of any length, with or without leading zeros (DynamoDB Local
// pads them to 21 digits), which compare as numbers, not as strings.
package streamseq

import "strings"

// Less reports whether sequence number a comes before b.
func Less(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// Compare orders sequence numbers for the slices package: -1 when a comes before b, 1
// after, 0 for the same number.
func Compare(a, b string) int {
	switch {
	case Less(a, b):
		return -1
	case Less(b, a):
		return 1
	}
	return 0
}
