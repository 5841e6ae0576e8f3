package dynamomem

import (
	"bytes"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/dynamo/internal/attrcheck"
)

// number parses a DynamoDB number as DynamoDB does (attrcheck.ParseNumber): not as
// big.Rat does, which takes "0x10" and "1/3".
func number(s string) (*big.Rat, bool) {
	r, err := attrcheck.ParseNumber(s)
	return r, err == nil
}

// formatNumber writes r as DynamoDB does: the shortest exact decimal, without exponent.
// A DynamoDB number has at most 130 + 37 digits after the point (1E-130 with 38
// significant digits), and so has a sum of two.
func formatNumber(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	ten := big.NewRat(10, 1)
	x := new(big.Rat).Set(r)
	for scale := 1; scale <= maxScale; scale++ {
		x.Mul(x, ten)
		if x.IsInt() {
			return r.FloatString(scale)
		}
	}
	return r.FloatString(maxScale)
}

// maxScale is the most digits after the point a DynamoDB number has.
const maxScale = 130 + 37

// normalize returns v with its numbers written as DynamoDB stores them ("1.50" as "1.5"),
// deep-copied so that the caller's later changes to its item do not reach the table.
func normalize(v types.AttributeValue) types.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberN:
		if r, ok := number(v.Value); ok {
			return &types.AttributeValueMemberN{Value: formatNumber(r)}
		}
		return &types.AttributeValueMemberN{Value: v.Value}
	case *types.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: v.Value}
	case *types.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: bytes.Clone(v.Value)}
	case *types.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: v.Value}
	case *types.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: v.Value}
	case *types.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberNS:
		ns := make([]string, len(v.Value))
		for i, n := range v.Value {
			ns[i] = normalize(&types.AttributeValueMemberN{Value: n}).(*types.AttributeValueMemberN).Value
		}
		return &types.AttributeValueMemberNS{Value: ns}
	case *types.AttributeValueMemberBS:
		bs := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			bs[i] = bytes.Clone(b)
		}
		return &types.AttributeValueMemberBS{Value: bs}
	case *types.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = normalize(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	case *types.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: normalizeItem(v.Value)}
	}
	return v
}

// normalizeItem is normalize for every attribute of item.
func normalizeItem(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(item))
	for k, v := range item {
		out[k] = normalize(v)
	}
	return out
}

// compare evaluates a op b as a condition does: = and <> compare values of any type (values
// of two types differ, and a missing attribute equals nothing, so "a <> :v" holds when a is
// missing), the orderings compare S, N and B values of one type and are false otherwise.
func compare(op string, a, b types.AttributeValue) bool {
	switch op {
	case "=":
		return a != nil && b != nil && equal(a, b)
	case "<>":
		return a == nil || b == nil || !equal(a, b)
	}
	if a == nil || b == nil {
		return false
	}
	c, ok := order(a, b)
	if !ok {
		return false
	}
	switch op {
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	return false
}

// order compares two S, N or B values of one type.
func order(a, b types.AttributeValue) (int, bool) {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		if b, ok := b.(*types.AttributeValueMemberS); ok {
			return strings.Compare(a.Value, b.Value), true
		}
	case *types.AttributeValueMemberN:
		if b, ok := b.(*types.AttributeValueMemberN); ok {
			x, ok1 := number(a.Value)
			y, ok2 := number(b.Value)
			if ok1 && ok2 {
				return x.Cmp(y), true
			}
		}
	case *types.AttributeValueMemberB:
		if b, ok := b.(*types.AttributeValueMemberB); ok {
			return bytes.Compare(a.Value, b.Value), true
		}
	}
	return 0, false
}

// equal reports whether a and b are one value: of one type, numbers equal as numbers,
// sets equal whatever their order.
func equal(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS, *types.AttributeValueMemberN, *types.AttributeValueMemberB:
		c, ok := order(a, b)
		return ok && c == 0
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(a.Value, b.Value, func(x, y string) bool { return x == y })
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(a.Value, b.Value, func(x, y string) bool {
			return equal(&types.AttributeValueMemberN{Value: x}, &types.AttributeValueMemberN{Value: y})
		})
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		return ok && sameSet(a.Value, b.Value, bytes.Equal)
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for i := range a.Value {
			if !equal(a.Value[i], b.Value[i]) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for k, v := range a.Value {
			w, ok := b.Value[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

func sameSet[T any](a, b []T, eq func(x, y T) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y T) bool { return eq(x, y) }) {
			return false
		}
	}
	return true
}

// arith computes a op b for two numbers, or fails as DynamoDB does when it runs the write.
func arith(op string, a, b types.AttributeValue) (types.AttributeValue, error) {
	an, ok1 := a.(*types.AttributeValueMemberN)
	bn, ok2 := b.(*types.AttributeValueMemberN)
	if !ok1 || !ok2 {
		return nil, errValidation{fmt.Sprintf("an operand in the update expression has an incorrect data type (%s %s %s)", attrcheck.TypeName(a), op, attrcheck.TypeName(b))}
	}
	x, ok1 := number(an.Value)
	y, ok2 := number(bn.Value)
	if !ok1 || !ok2 {
		return nil, errValidation{"a number in the update expression is not a number"}
	}
	if op == "-" {
		y.Neg(y)
	}
	// A result DynamoDB cannot store fails the write when it runs, as it does there.
	if err := attrcheck.CheckNumber(x.Add(x, y)); err != nil {
		return nil, errValidation{err.Error()}
	}
	return &types.AttributeValueMemberN{Value: formatNumber(x)}, nil
}
