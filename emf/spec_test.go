package emf_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// specExample is the example document of the EMF specification, as published.
const specExample = `{
  "_aws": {
    "Timestamp": 1574109732004,
    "CloudWatchMetrics": [
      {
        "Namespace": "lambda-function-metrics",
        "Dimensions": [["functionVersion"]],
        "Metrics": [
          {
            "Name": "time",
            "Unit": "Milliseconds",
            "StorageResolution": 60
          }
        ]
      }
    ]
  },
  "functionVersion": "$LATEST",
  "time": 100,
  "requestId": "989ffbf8-9ace-4817-a57c-e4dd734019ee"
}`

// checkEMF returns why doc breaks a rule of the EMF specification that CloudWatch enforces,
// or nil: the "_aws" metadata with a Timestamp and metric directives; each directive's
// namespace, dimension sets (at most 30 keys each, naming string members) and metric
// definitions (at most 100, each naming a number or an array of at most 100 numbers).
func checkEMF(doc []byte) error {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(doc, &root); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	var meta struct {
		Timestamp         *int64
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct {
				Name              string
				Unit              string
				StorageResolution *int
			}
		}
	}
	raw, ok := root["_aws"]
	if !ok {
		return fmt.Errorf("no _aws member")
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("_aws: %w", err)
	}
	if meta.Timestamp == nil {
		return fmt.Errorf("_aws has no Timestamp")
	}
	if len(meta.CloudWatchMetrics) == 0 {
		return fmt.Errorf("_aws has no CloudWatchMetrics")
	}
	for _, d := range meta.CloudWatchMetrics {
		if d.Namespace == "" || len(d.Namespace) > 255 {
			return fmt.Errorf("namespace %q", d.Namespace)
		}
		if d.Dimensions == nil {
			return fmt.Errorf("no Dimensions")
		}
		for _, set := range d.Dimensions {
			if len(set) > 30 {
				return fmt.Errorf("a dimension set of %d keys", len(set))
			}
			for _, k := range set {
				var s string
				if err := json.Unmarshal(root[k], &s); err != nil {
					return fmt.Errorf("dimension %q is not a string member", k)
				}
			}
		}
		if len(d.Metrics) == 0 || len(d.Metrics) > 100 {
			return fmt.Errorf("%d metric definitions", len(d.Metrics))
		}
		for _, m := range d.Metrics {
			if m.Name == "" || len(m.Name) > 255 {
				return fmt.Errorf("metric name %q", m.Name)
			}
			if m.StorageResolution != nil && *m.StorageResolution != 1 && *m.StorageResolution != 60 {
				return fmt.Errorf("storage resolution %d", *m.StorageResolution)
			}
			var one float64
			var many []float64
			if err := json.Unmarshal(root[m.Name], &one); err != nil {
				if err := json.Unmarshal(root[m.Name], &many); err != nil {
					return fmt.Errorf("metric %q is not a number or an array of numbers", m.Name)
				}
				if len(many) > 100 {
					return fmt.Errorf("metric %q has %d values", m.Name, len(many))
				}
			}
		}
	}
	return nil
}

// documents splits output into its lines, checks each against the specification, and
// decodes it.
func documents(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var docs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		require.NoError(t, checkEMF(sc.Bytes()), "%s", sc.Text())
		var doc map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &doc))
		docs = append(docs, doc)
	}
	require.NoError(t, sc.Err())
	return docs
}

// The checker accepts the specification's example and refuses what the specification
// forbids, so the documents it passes below are valid for a reason.
func TestCheckEMF(t *testing.T) {
	t.Parallel()
	require.NoError(t, checkEMF([]byte(specExample)))
	values := func(n int) string {
		b, _ := json.Marshal(make([]float64, n))
		return string(b)
	}
	dims := func(n int) (set, members string) {
		var keys []string
		m := map[string]string{}
		for i := range n {
			k := fmt.Sprintf("d%d", i)
			keys = append(keys, k)
			m[k] = "v"
		}
		a, _ := json.Marshal(keys)
		b, _ := json.Marshal(m)
		return string(a), string(b[1 : len(b)-1])
	}
	set30, members30 := dims(30)
	set31, members31 := dims(31)
	doc := func(dimensions, members, metric string) string {
		return `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[` + dimensions +
			`],"Metrics":[{"Name":"m","Unit":"Count"}]}]},` + members + `"m":` + metric + `}`
	}
	tests := []struct {
		name  string
		doc   string
		valid bool
	}{
		{"no dimensions", doc(`[]`, ``, `1`), true},
		{"100 values", doc(`[]`, ``, values(100)), true},
		{"30 dimensions", doc(set30, members30+",", `1`), true},
		{"101 values", doc(`[]`, ``, values(101)), false},
		{"31 dimensions", doc(set31, members31+",", `1`), false},
		{"dimension not a member", doc(`["d0"]`, ``, `1`), false},
		{"dimension not a string", doc(`["d0"]`, `"d0":1,`, `1`), false},
		{"metric not a number", doc(`[]`, ``, `"1"`), false},
		{"metric missing", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[{"Name":"m"}]}]}}`, false},
		{"no timestamp", `{"_aws":{"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[{"Name":"m"}]}]},"m":1}`, false},
		{"no metadata", `{"m":1}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := checkEMF([]byte(tc.doc))
			if tc.valid {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}
