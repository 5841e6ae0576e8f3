package samtemplate

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// longForm converts a YAML node into plain data (maps, slices, strings, numbers, booleans,
// nil), turning CloudFormation short-form tags into their long form: !Ref X becomes
// {"Ref": "X"}, !GetAtt A.B becomes {"Fn::GetAtt": ["A", "B"]}, and any other !Name becomes
// {"Fn::Name": value}.
func longForm(n *yaml.Node) (any, error) {
	v, err := plain(n)
	if err != nil {
		return nil, err
	}
	tag := n.Tag
	if n.Kind == yaml.AliasNode || !strings.HasPrefix(tag, "!") || strings.HasPrefix(tag, "!!") {
		return v, nil
	}
	name := tag[1:]
	switch name {
	case "Ref", "Condition":
		return map[string]any{name: v}, nil
	case "GetAtt":
		// The short form takes "Resource.Attribute"; the attribute may itself contain dots.
		if s, ok := v.(string); ok {
			resource, attr, found := strings.Cut(s, ".")
			if !found {
				return nil, fmt.Errorf("samtemplate: line %d: !GetAtt %q: want Resource.Attribute", n.Line, s)
			}
			v = []any{resource, attr}
		}
	}
	return map[string]any{"Fn::" + name: v}, nil
}

// plain converts n without looking at its own custom tag; children are converted with
// longForm.
func plain(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, fmt.Errorf("samtemplate: want one YAML document, got %d", len(n.Content))
		}
		return longForm(n.Content[0])
	case yaml.AliasNode:
		return longForm(n.Alias)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := longForm(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("samtemplate: line %d: mapping key is not a scalar", k.Line)
			}
			if _, dup := out[k.Value]; dup {
				return nil, fmt.Errorf("samtemplate: line %d: duplicate key %q", k.Line, k.Value)
			}
			v, err := longForm(val)
			if err != nil {
				return nil, err
			}
			out[k.Value] = v
		}
		return out, nil
	case yaml.ScalarNode:
		return scalar(n)
	}
	return nil, fmt.Errorf("samtemplate: line %d: unsupported YAML node kind %d", n.Line, n.Kind)
}

// scalar decodes a scalar by its resolved YAML type. A scalar with a custom tag (!Ref X)
// is a string; so is anything YAML would not resolve to another type.
func scalar(n *yaml.Node) (any, error) {
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		return n.Value, nil
	}
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, fmt.Errorf("samtemplate: line %d: %w", n.Line, err)
		}
		return b, nil
	case "!!int":
		i, err := strconv.ParseInt(n.Value, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("samtemplate: line %d: %w", n.Line, err)
		}
		return i, nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, fmt.Errorf("samtemplate: line %d: %w", n.Line, err)
		}
		return f, nil
	}
	return n.Value, nil
}
