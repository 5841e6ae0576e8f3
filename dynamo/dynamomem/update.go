package dynamomem

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/dynamo/internal/attrcheck"
)

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
