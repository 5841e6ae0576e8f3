package samtemplate

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/samtables"
)

var update = flag.Bool("update", false, "rewrite internal/samtables/tables.json from the template")

// TestTablesJSON checks that internal/samtables/tables.json, from which the tests create
// their tables, holds exactly the template's tables; -update rewrites it.
func TestTablesJSON(t *testing.T) {
	tmpl := loadTemplate(t)
	tables := map[string]*samtables.Table{}
	for _, id := range tmpl.LogicalIDs(TableType) {
		tb, err := tmpl.Table(id)
		require.NoError(t, err)
		tables[id] = tb
	}
	want, err := json.MarshalIndent(tables, "", "  ")
	require.NoError(t, err)
	want = append(want, '\n')
	tmplPath, err := Find()
	require.NoError(t, err)
	path := filepath.Join(filepath.Dir(filepath.Dir(tmplPath)), "internal", "samtables", "tables.json")
	if *update {
		require.NoError(t, os.WriteFile(path, want, 0o644))
		return // samtables embeds the file as it was when the test was built
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "%s differs from %s: run go test ./samtemplate -update in lab/", path, RelPath)
	for id, tb := range tables {
		fromJSON, err := samtables.Lookup(id)
		require.NoError(t, err)
		assert.Equal(t, tb, fromJSON, id)
	}
}
