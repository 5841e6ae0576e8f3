package dynamomem

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The expression subset that [Store] evaluates: top-level attributes only, named bare
// (unless reserved) or through #placeholders, and values through :placeholders.
//
//	condition: a = b, a <> b, a < b, a <= b, a > b, a >= b, a BETWEEN b AND c,
//	           a IN (b, c, ...), attribute_exists(p), attribute_not_exists(p),
//	           begins_with(p, b), NOT, AND, OR and parentheses
//	update:    SET p = v | p = v + w | p = v - w | p = if_not_exists(q, v), REMOVE p,
//	           ADD p :number
//
// Anything else (nested paths, size, contains, attribute_type, list_append, DELETE, ADD
// of sets) is refused when parsed, that is by idem.Attach: a test never passes in memory
// on an expression that would behave otherwise, or fail, in DynamoDB.

// errUnsupported marks what DynamoDB takes but Store does not evaluate.
var errUnsupported = errors.New("not supported in memory (use DynamoDB Local: dynamotest.NewStore)")

type tokKind int

const (
	tEOF   tokKind = iota
	tIdent         // a bare name, keyword or function name
	tName          // #placeholder
	tValue         // :placeholder
	tOp            // = <> < <= > >= + - ( ) , . [ ]
)

type token struct {
	kind tokKind
	text string
}

func lex(s string) ([]token, error) {
	var toks []token
	isIdent := func(c byte) bool {
		return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#' || c == ':':
			j := i + 1
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			if j == i+1 {
				return nil, fmt.Errorf("syntax error at %q", s[i:])
			}
			kind := tName
			if c == ':' {
				kind = tValue
			}
			toks = append(toks, token{kind, s[i:j]})
			i = j
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			toks = append(toks, token{tIdent, s[i:j]})
			i = j
		default:
			op := ""
			for _, o := range []string{"<>", "<=", ">=", "=", "<", ">", "+", "-", "(", ")", ",", ".", "[", "]"} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("syntax error: unexpected %q", s[i:i+1])
			}
			toks = append(toks, token{tOp, op})
			i += len(op)
		}
	}
	return append(toks, token{kind: tEOF}), nil
}

// parser parses one expression; names and values are shared by the expressions of one
// write, which together must use every placeholder given.
type parser struct {
	toks      []token
	pos       int
	names     map[string]string
	values    map[string]types.AttributeValue
	usedNames map[string]bool
	usedVals  map[string]bool
}

func newParser(names map[string]string, values map[string]types.AttributeValue) *parser {
	return &parser{names: names, values: values, usedNames: map[string]bool{}, usedVals: map[string]bool{}}
}

// start lexes expr for parsing.
func (p *parser) start(expr string) error {
	toks, err := lex(expr)
	if err != nil {
		return err
	}
	p.toks, p.pos = toks, 0
	return nil
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

// keyword reports whether the next token is the keyword kw (case-insensitive), consuming it.
func (p *parser) keyword(kw string) bool {
	if t := p.peek(); t.kind == tIdent && strings.EqualFold(t.text, kw) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) op(o string) bool {
	if t := p.peek(); t.kind == tOp && t.text == o {
		p.pos++
		return true
	}
	return false
}

func (p *parser) expect(o string) error {
	if !p.op(o) {
		return fmt.Errorf("syntax error: want %q at %s", o, p.where())
	}
	return nil
}

func (p *parser) where() string {
	if t := p.peek(); t.kind != tEOF {
		return fmt.Sprintf("%q", t.text)
	}
	return "the end"
}

func (p *parser) end() error {
	if p.peek().kind != tEOF {
		return fmt.Errorf("syntax error: unexpected %s", p.where())
	}
	return nil
}

// path parses an attribute path: a top-level attribute, by name or #placeholder.
func (p *parser) path() (string, error) {
	t := p.next()
	var name string
	switch t.kind {
	case tName:
		n, ok := p.names[t.text]
		if !ok {
			return "", fmt.Errorf("expression attribute name %s is not defined", t.text)
		}
		p.usedNames[t.text] = true
		name = n
	case tIdent:
		if reserved(t.text) {
			return "", fmt.Errorf("attribute name is a reserved keyword; reserved keyword: %s (use an expression attribute name)", t.text)
		}
		name = t.text
	default:
		return "", fmt.Errorf("syntax error: want an attribute at %q", t.text)
	}
	if nt := p.peek(); nt.kind == tOp && (nt.text == "." || nt.text == "[") {
		return "", fmt.Errorf("nested path %s%s...: %w", t.text, nt.text, errUnsupported)
	}
	return name, nil
}

// value parses a :placeholder.
func (p *parser) value() (types.AttributeValue, error) {
	t := p.next()
	if t.kind != tValue {
		return nil, fmt.Errorf("syntax error: want a :value at %q", t.text)
	}
	v, ok := p.values[t.text]
	if !ok || v == nil {
		return nil, fmt.Errorf("expression attribute value %s is not defined", t.text)
	}
	p.usedVals[t.text] = true
	return v, nil
}

// unused returns an error naming a placeholder that no expression used, as DynamoDB does.
func (p *parser) unused() error {
	for n := range p.names {
		if !p.usedNames[n] {
			return fmt.Errorf("expression attribute name %s is unused in expressions", n)
		}
	}
	for v := range p.values {
		if !p.usedVals[v] {
			return fmt.Errorf("expression attribute value %s is unused in expressions", v)
		}
	}
	return nil
}

// operand is an attribute or a value of a condition or an update.
type operand struct {
	path  string               // "" for a value
	value types.AttributeValue // nil for a path
}

func (o operand) eval(item map[string]types.AttributeValue) types.AttributeValue {
	if o.path == "" {
		return o.value
	}
	return item[o.path]
}

func (p *parser) operand() (operand, error) {
	if t := p.peek(); t.kind == tValue {
		v, err := p.value()
		return operand{value: v}, err
	}
	if t := p.peek(); t.kind == tIdent && p.toks[p.pos+1].kind == tOp && p.toks[p.pos+1].text == "(" {
		return operand{}, fmt.Errorf("function %s as an operand: %w", t.text, errUnsupported)
	}
	path, err := p.path()
	return operand{path: path}, err
}
