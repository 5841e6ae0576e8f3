package dynamomem

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/dynamo/internal/attrcheck"
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

// update is a parsed update expression: its actions in order.
type update struct {
	actions []action
}

type action struct {
	kind string // SET, REMOVE or ADD
	path string
	// SET: l, or l op r; ifNotExists makes l if_not_exists(path, value).
	l, r        operand
	op          string
	ifNotExists string
	// ADD: the number.
	add types.AttributeValue
}

// parseUpdate parses an update expression.
func (p *parser) parseUpdate(expr string) (*update, error) {
	if err := p.start(expr); err != nil {
		return nil, err
	}
	u := &update{}
	seen := map[string]bool{}
	paths := map[string]bool{}
	for p.peek().kind != tEOF {
		t := p.next()
		clause := strings.ToUpper(t.text)
		if t.kind != tIdent || (clause != "SET" && clause != "REMOVE" && clause != "ADD" && clause != "DELETE") {
			return nil, fmt.Errorf("syntax error: want SET, REMOVE, ADD or DELETE at %q", t.text)
		}
		if clause == "DELETE" {
			return nil, fmt.Errorf("DELETE (from a set): %w", errUnsupported)
		}
		if seen[clause] {
			return nil, fmt.Errorf("the %q section can only be used once in an update expression", clause)
		}
		seen[clause] = true
		for {
			a, err := p.action(clause)
			if err != nil {
				return nil, err
			}
			if paths[a.path] {
				return nil, fmt.Errorf("two document paths overlap with each other: [%s]", a.path)
			}
			paths[a.path] = true
			u.actions = append(u.actions, a)
			if !p.op(",") {
				break
			}
		}
	}
	if len(u.actions) == 0 {
		return nil, errors.New("the update expression is empty")
	}
	return u, nil
}

func (p *parser) action(clause string) (action, error) {
	path, err := p.path()
	if err != nil {
		return action{}, err
	}
	a := action{kind: clause, path: path}
	switch clause {
	case "REMOVE":
		return a, nil
	case "ADD":
		v, err := p.value()
		if err != nil {
			return action{}, err
		}
		if _, ok := v.(*types.AttributeValueMemberN); !ok {
			return action{}, fmt.Errorf("ADD of a %s: %w", attrcheck.TypeName(v), errUnsupported)
		}
		a.add = v
		return a, nil
	}
	if err := p.expect("="); err != nil {
		return action{}, err
	}
	if a.l, a.ifNotExists, err = p.setOperand(); err != nil {
		return action{}, err
	}
	if t := p.peek(); t.kind == tOp && (t.text == "+" || t.text == "-") {
		if a.ifNotExists != "" {
			// if_not_exists(q, v) + w: the left side is then a computed value.
			return action{}, fmt.Errorf("if_not_exists in arithmetic: %w", errUnsupported)
		}
		p.pos++
		a.op = t.text
		var inner string
		if a.r, inner, err = p.setOperand(); err != nil {
			return action{}, err
		}
		if inner != "" {
			return action{}, fmt.Errorf("if_not_exists in arithmetic: %w", errUnsupported)
		}
		for _, o := range []operand{a.l, a.r} {
			if _, ok := o.value.(*types.AttributeValueMemberN); o.path == "" && !ok {
				return action{}, fmt.Errorf("incorrect operand type for operator or function; operator: %s, operand type: %s", a.op, attrcheck.TypeName(o.value))
			}
		}
	}
	return a, nil
}

// setOperand parses the right side of SET: an operand, or if_not_exists(path, operand),
// returned as the operand with the path it tests.
func (p *parser) setOperand() (operand, string, error) {
	t := p.peek()
	if t.kind != tIdent || p.toks[p.pos+1].kind != tOp || p.toks[p.pos+1].text != "(" {
		o, err := p.operand()
		return o, "", err
	}
	if t.text != "if_not_exists" {
		if t.text == "list_append" {
			return operand{}, "", fmt.Errorf("function list_append: %w", errUnsupported)
		}
		return operand{}, "", fmt.Errorf("invalid function name; function: %s", t.text)
	}
	p.pos += 2
	path, err := p.path()
	if err != nil {
		return operand{}, "", err
	}
	if err := p.expect(","); err != nil {
		return operand{}, "", err
	}
	o, err := p.operand()
	if err != nil {
		return operand{}, "", err
	}
	return o, path, p.expect(")")
}

// errValidation is a failure DynamoDB reports only when it runs the write: arithmetic on
// an attribute that is missing or not a number.
type errValidation struct{ msg string }

func (e errValidation) Error() string { return e.msg }

// apply returns old (nil when absent) updated by u: every value is read from old, as
// DynamoDB evaluates an update expression against the item before it.
func (u *update) apply(old map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	next := make(map[string]types.AttributeValue, len(old)+len(u.actions))
	for k, v := range old {
		next[k] = v
	}
	for _, a := range u.actions {
		switch a.kind {
		case "REMOVE":
			delete(next, a.path)
		case "ADD":
			cur, ok := old[a.path]
			if !ok {
				next[a.path] = a.add
				continue
			}
			n, err := arith("+", cur, a.add)
			if err != nil {
				return nil, err
			}
			next[a.path] = n
		case "SET":
			l := a.l.eval(old)
			if a.ifNotExists != "" {
				if v, ok := old[a.ifNotExists]; ok {
					l = v
				}
			}
			if l == nil {
				return nil, errValidation{"the provided expression refers to an attribute that does not exist in the item: " + a.l.path}
			}
			if a.op == "" {
				next[a.path] = l
				continue
			}
			r := a.r.eval(old)
			if r == nil {
				return nil, errValidation{"the provided expression refers to an attribute that does not exist in the item: " + a.r.path}
			}
			n, err := arith(a.op, l, r)
			if err != nil {
				return nil, err
			}
			next[a.path] = n
		}
	}
	return next, nil
}
