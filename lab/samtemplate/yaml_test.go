package samtemplate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestLongForm(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want any
	}{
		{name: "ref", in: "!Ref Table", want: map[string]any{"Ref": "Table"}},
		{name: "getatt short", in: "!GetAtt Queue.Arn", want: map[string]any{"Fn::GetAtt": []any{"Queue", "Arn"}}},
		{name: "getatt dotted attribute", in: "!GetAtt Db.Endpoint.Address", want: map[string]any{"Fn::GetAtt": []any{"Db", "Endpoint.Address"}}},
		{name: "getatt list", in: "!GetAtt [Queue, Arn]", want: map[string]any{"Fn::GetAtt": []any{"Queue", "Arn"}}},
		{name: "sub string", in: `!Sub "https://${Api}.example"`, want: map[string]any{"Fn::Sub": "https://${Api}.example"}},
		{name: "sub list", in: "!Sub [\"${A}\", {A: !Ref B}]", want: map[string]any{"Fn::Sub": []any{"${A}", map[string]any{"A": map[string]any{"Ref": "B"}}}}},
		{name: "nested", in: "!Join [',', [!Ref A, !GetAtt B.Arn]]", want: map[string]any{"Fn::Join": []any{",", []any{map[string]any{"Ref": "A"}, map[string]any{"Fn::GetAtt": []any{"B", "Arn"}}}}}},
		{name: "long form kept", in: "{Ref: A}", want: map[string]any{"Ref": "A"}},
		{name: "scalars", in: "[1, 2.5, true, null, 'text', 0x10]", want: []any{int64(1), 2.5, true, nil, "text", int64(16)}},
		{name: "alias", in: "{a: &x [1], b: *x}", want: map[string]any{"a": []any{int64(1)}, "b": []any{int64(1)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var n yaml.Node
			require.NoError(t, yaml.Unmarshal([]byte(tc.in), &n))
			got, err := longForm(&n)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
	}{
		{name: "empty", in: ""},
		{name: "no resources", in: "Outputs: {}"},
		{name: "getatt without attribute", in: "Resources: {A: {Type: T, Properties: {P: !GetAtt B}}}"},
		{name: "duplicate key", in: "Resources: {A: {Type: T}, A: {Type: U}}"},
		{name: "not yaml", in: "Resources: ["},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.in))
			assert.Error(t, err)
		})
	}
}

func FuzzParse(f *testing.F) {
	path, err := Find()
	require.NoError(f, err)
	data, err := os.ReadFile(filepath.Clean(path))
	require.NoError(f, err)
	f.Add(data)
	f.Add([]byte("Resources: {A: {Type: T, Properties: {P: !GetAtt B.C, Q: !Sub [x, {}]}}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tmpl, err := Parse(data)
		if err != nil {
			return
		}
		for id := range tmpl.Resources {
			if tb, err := tmpl.Table(id); err == nil {
				_, _ = tb.CreateTableInput("t")
			}
		}
	})
}
