package samtemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idem/internal/samtables"
)

// RelPath is where the template lives, relative to the repository root.
const RelPath = samtables.Source

// TableType is the CloudFormation type of a DynamoDB table.
const TableType = "AWS::DynamoDB::Table"

// Template is a parsed SAM template: its resources and outputs as plain data, with
// intrinsic functions in their long form.
type Template struct {
	// Globals holds the template's Globals section, by resource kind ("Function", ...).
	Globals map[string]map[string]any
	// Resources holds the resources by logical ID.
	Resources map[string]Resource
	// Outputs holds the outputs by logical ID.
	Outputs map[string]Output
}

// Resource is one resource of a [Template].
type Resource struct {
	// Type is the resource type, such as "AWS::DynamoDB::Table".
	Type string
	// Metadata is the resource's Metadata section.
	Metadata map[string]any
	// Properties are the resource's own properties, without Globals.
	Properties map[string]any
}

// Output is one output of a [Template].
type Output struct {
	// Description is the output's description.
	Description string
	// Value is the output's value, an intrinsic function in long form or a literal.
	Value any
}

// Parse parses a SAM or CloudFormation template in YAML, accepting the short-form tags of
// the intrinsic functions.
func Parse(data []byte) (*Template, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("samtemplate: %w", err)
	}
	if doc.Kind == 0 {
		return nil, errors.New("samtemplate: empty template")
	}
	tree, err := longForm(&doc)
	if err != nil {
		return nil, err
	}
	var t Template
	if err := remarshal(tree, &t); err != nil {
		return nil, fmt.Errorf("samtemplate: %w", err)
	}
	if len(t.Resources) == 0 {
		return nil, errors.New("samtemplate: template has no resources")
	}
	return &t, nil
}

// Load reads and parses the template at path.
func Load(path string) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("samtemplate: %w", err)
	}
	return Parse(data)
}

// Find returns the path of the repository's template ([RelPath]), looking for it from the
// working directory up through its parents, as `go test` (which runs in the package
// directory, in the lab module or the root's) needs.
func Find() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("samtemplate: %w", err)
	}
	for {
		path := filepath.Join(dir, filepath.FromSlash(RelPath))
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("samtemplate: no %s in the working directory or its parents", RelPath)
		}
		dir = parent
	}
}

// LoadRepo finds the repository's template with [Find] and loads it.
func LoadRepo() (*Template, error) {
	path, err := Find()
	if err != nil {
		return nil, err
	}
	return Load(path)
}

// Resource returns the resource with the given logical ID, checking that it has type typ.
func (t *Template) Resource(logicalID, typ string) (Resource, error) {
	r, ok := t.Resources[logicalID]
	if !ok {
		return Resource{}, fmt.Errorf("samtemplate: no resource %s", logicalID)
	}
	if r.Type != typ {
		return Resource{}, fmt.Errorf("samtemplate: resource %s is a %s, not a %s", logicalID, r.Type, typ)
	}
	return r, nil
}

// LogicalIDs returns the sorted logical IDs of the resources of type typ.
func (t *Template) LogicalIDs(typ string) []string {
	var ids []string
	for id, r := range t.Resources {
		if r.Type == typ {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// DecodeProperties decodes the properties of resource logicalID, which must have type typ,
// into v (a pointer to a struct whose fields are named as the properties). For
// AWS::Serverless::Function resources the template's Globals.Function are applied first,
// as SAM does for top-level properties.
func (t *Template) DecodeProperties(logicalID, typ string, v any) error {
	r, err := t.Resource(logicalID, typ)
	if err != nil {
		return err
	}
	props := r.Properties
	if typ == "AWS::Serverless::Function" {
		props = make(map[string]any, len(r.Properties))
		for k, g := range t.Globals["Function"] {
			props[k] = g
		}
		for k, p := range r.Properties {
			props[k] = p
		}
	}
	if err := remarshal(props, v); err != nil {
		return fmt.Errorf("samtemplate: %s properties: %w", logicalID, err)
	}
	return nil
}

// Ref returns the logical ID that v refers to when v is {"Ref": ID}.
func Ref(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", false
	}
	id, ok := m["Ref"].(string)
	return id, ok
}

// GetAtt returns the logical ID and attribute that v refers to when v is
// {"Fn::GetAtt": [ID, Attribute]}.
func GetAtt(v any) (logicalID, attribute string, ok bool) {
	m, isMap := v.(map[string]any)
	if !isMap || len(m) != 1 {
		return "", "", false
	}
	args, isList := m["Fn::GetAtt"].([]any)
	if !isList || len(args) != 2 {
		return "", "", false
	}
	logicalID, ok1 := args[0].(string)
	attribute, ok2 := args[1].(string)
	return logicalID, attribute, ok1 && ok2
}

// remarshal converts plain data into v through JSON, so struct fields match property names
// the way encoding/json matches them.
func remarshal(in, v any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// Table returns the definition of the table with the given logical ID.
func (t *Template) Table(logicalID string) (*samtables.Table, error) {
	tb := &samtables.Table{LogicalID: logicalID}
	if err := t.DecodeProperties(logicalID, TableType, tb); err != nil {
		return nil, err
	}
	return tb, nil
}
