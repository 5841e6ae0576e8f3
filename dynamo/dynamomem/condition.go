package dynamomem

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/dynamo/internal/attrcheck"
)

// cond is a parsed condition expression.
type cond interface {
	eval(item map[string]types.AttributeValue) bool
}

type (
	andCond struct{ l, r cond }
	orCond  struct{ l, r cond }
	notCond struct{ c cond }
	cmpCond struct {
		op   string
		l, r operand
	}
	betweenCond struct{ v, lo, hi operand }
	inCond      struct {
		v    operand
		list []operand
	}
	existsCond struct {
		path string
		want bool
	}
	beginsCond struct {
		path   string
		prefix operand
	}
)

func (c andCond) eval(it map[string]types.AttributeValue) bool { return c.l.eval(it) && c.r.eval(it) }
func (c orCond) eval(it map[string]types.AttributeValue) bool  { return c.l.eval(it) || c.r.eval(it) }
func (c notCond) eval(it map[string]types.AttributeValue) bool { return !c.c.eval(it) }

func (c cmpCond) eval(it map[string]types.AttributeValue) bool {
	return compare(c.op, c.l.eval(it), c.r.eval(it))
}

func (c betweenCond) eval(it map[string]types.AttributeValue) bool {
	v := c.v.eval(it)
	return compare(">=", v, c.lo.eval(it)) && compare("<=", v, c.hi.eval(it))
}

func (c inCond) eval(it map[string]types.AttributeValue) bool {
	v := c.v.eval(it)
	for _, o := range c.list {
		if compare("=", v, o.eval(it)) {
			return true
		}
	}
	return false
}

func (c existsCond) eval(it map[string]types.AttributeValue) bool {
	_, ok := it[c.path]
	return ok == c.want
}

func (c beginsCond) eval(it map[string]types.AttributeValue) bool {
	switch v := it[c.path].(type) {
	case *types.AttributeValueMemberS:
		pre, ok := c.prefix.eval(it).(*types.AttributeValueMemberS)
		return ok && strings.HasPrefix(v.Value, pre.Value)
	case *types.AttributeValueMemberB:
		pre, ok := c.prefix.eval(it).(*types.AttributeValueMemberB)
		return ok && strings.HasPrefix(string(v.Value), string(pre.Value))
	}
	return false
}

// parseCondition parses a condition expression.
func (p *parser) parseCondition(expr string) (cond, error) {
	if err := p.start(expr); err != nil {
		return nil, err
	}
	c, err := p.or()
	if err != nil {
		return nil, err
	}
	return c, p.end()
}

func (p *parser) or() (cond, error) {
	l, err := p.and()
	for err == nil && p.keyword("OR") {
		var r cond
		r, err = p.and()
		l = orCond{l, r}
	}
	return l, err
}

func (p *parser) and() (cond, error) {
	l, err := p.not()
	for err == nil && p.keyword("AND") {
		var r cond
		r, err = p.not()
		l = andCond{l, r}
	}
	return l, err
}

func (p *parser) not() (cond, error) {
	if p.keyword("NOT") {
		c, err := p.not()
		return notCond{c}, err
	}
	return p.primary()
}

func (p *parser) primary() (cond, error) {
	if p.op("(") {
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		return c, p.expect(")")
	}
	if t := p.peek(); t.kind == tIdent && p.toks[p.pos+1].kind == tOp && p.toks[p.pos+1].text == "(" {
		return p.function()
	}
	l, err := p.operand()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == tOp {
		switch t.text {
		case "=", "<>", "<", "<=", ">", ">=":
			p.pos++
			r, err := p.operand()
			if err != nil {
				return nil, err
			}
			if t.text != "=" && t.text != "<>" {
				if err := ordered(t.text, l, r); err != nil {
					return nil, err
				}
			}
			return cmpCond{t.text, l, r}, nil
		}
	}
	switch {
	case p.keyword("BETWEEN"):
		lo, err := p.operand()
		if err != nil {
			return nil, err
		}
		if !p.keyword("AND") {
			return nil, fmt.Errorf("syntax error: want AND in BETWEEN at %s", p.where())
		}
		hi, err := p.operand()
		if err != nil {
			return nil, err
		}
		if err := ordered("BETWEEN", l, lo, hi); err != nil {
			return nil, err
		}
		if lo.path == "" && hi.path == "" && compare(">", lo.value, hi.value) {
			return nil, errors.New("the BETWEEN operator requires upper bound to be greater than or equal to lower bound")
		}
		return betweenCond{l, lo, hi}, nil
	case p.keyword("IN"):
		if err := p.expect("("); err != nil {
			return nil, err
		}
		var list []operand
		for {
			o, err := p.operand()
			if err != nil {
				return nil, err
			}
			list = append(list, o)
			if !p.op(",") {
				break
			}
		}
		return inCond{l, list}, p.expect(")")
	}
	return nil, fmt.Errorf("syntax error: want a comparison at %s", p.where())
}

// ordered refuses, as DynamoDB does before running anything, a value of a type that an
// ordering comparison cannot take.
func ordered(op string, os ...operand) error {
	for _, o := range os {
		switch o.value.(type) {
		case nil, *types.AttributeValueMemberS, *types.AttributeValueMemberN, *types.AttributeValueMemberB:
		default:
			return fmt.Errorf("incorrect operand type for operator or function; operator or function: %s, operand type: %s", op, attrcheck.TypeName(o.value))
		}
	}
	return nil
}

func (p *parser) function() (cond, error) {
	name := p.next().text
	p.pos++ // "("
	switch name {
	case "attribute_exists", "attribute_not_exists":
		path, err := p.path()
		if err != nil {
			return nil, err
		}
		return existsCond{path: path, want: name == "attribute_exists"}, p.expect(")")
	case "begins_with":
		path, err := p.path()
		if err != nil {
			return nil, err
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
		pre, err := p.operand()
		if err != nil {
			return nil, err
		}
		switch pre.value.(type) {
		case nil, *types.AttributeValueMemberS, *types.AttributeValueMemberB:
		default:
			return nil, fmt.Errorf("incorrect operand type for operator or function; operator or function: begins_with, operand type: %s", attrcheck.TypeName(pre.value))
		}
		return beginsCond{path: path, prefix: pre}, p.expect(")")
	case "attribute_type", "contains", "size":
		return nil, fmt.Errorf("function %s: %w", name, errUnsupported)
	}
	return nil, fmt.Errorf("invalid function name; function: %s", name)
}
