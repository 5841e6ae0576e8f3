package samtables

import (
	_ "embed" // tables.json
	"encoding/json"
	"fmt"
)

// Source is where the tables are defined, relative to the repository root.
const Source = "infra/template.yaml"

// tablesJSON is tables.json: the properties of every table of [Source], by logical ID.
//
//go:embed tables.json
var tablesJSON []byte

// Lookup returns the definition of the table with the given logical ID.
func Lookup(logicalID string) (*Table, error) {
	var tables map[string]*Table
	if err := json.Unmarshal(tablesJSON, &tables); err != nil {
		return nil, fmt.Errorf("samtables: tables.json: %w", err)
	}
	tb, ok := tables[logicalID]
	if !ok {
		return nil, fmt.Errorf("samtables: no table %s in %s", logicalID, Source)
	}
	tb.LogicalID = logicalID
	return tb, nil
}
