package emf

import (
	"bytes"
	"encoding/json"
	"time"
)

// awsKey is the root member that holds a document's metadata.
const awsKey = "_aws"

// metadata is the "_aws" member of a document.
type metadata struct {
	// Timestamp is milliseconds since the epoch.
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// directive is a MetricDirective: which root members are metrics, and their dimensions.
type directive struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []definition `json:"Metrics"`
}

// definition is a MetricDefinition.
type definition struct {
	Name string `json:"Name"`
	Unit Unit   `json:"Unit,omitempty"`
}

// encode returns the documents for metrics at now, one JSON object per line. The metrics
// are cut into groups of [MaxMetrics], and each group into documents of at most
// [MaxValues] values per metric: document k of a group carries the k-th hundred values of
// each metric that has that many.
func encode(cfg config, now time.Time, metrics []*metric) ([]byte, error) {
	dimSet := make([]string, len(cfg.dims)) // one dimension set of every dimension
	for i, d := range cfg.dims {
		dimSet[i] = d.name
	}
	var out bytes.Buffer
	for len(metrics) > 0 {
		group := metrics[:min(len(metrics), MaxMetrics)]
		metrics = metrics[len(group):]
		for k := 0; ; k++ {
			root := make(map[string]any, 1+len(cfg.dims)+len(group))
			var defs []definition
			for _, m := range group {
				if k*MaxValues >= len(m.values) {
					continue
				}
				chunk := m.values[k*MaxValues : min(len(m.values), (k+1)*MaxValues)]
				defs = append(defs, definition{Name: m.name, Unit: m.unit})
				if len(chunk) == 1 {
					root[m.name] = chunk[0]
				} else {
					root[m.name] = chunk
				}
			}
			if len(defs) == 0 {
				break
			}
			for _, d := range cfg.dims {
				root[d.name] = d.value
			}
			root[awsKey] = metadata{
				Timestamp: now.UnixMilli(),
				CloudWatchMetrics: []directive{{
					Namespace:  cfg.namespace,
					Dimensions: [][]string{dimSet},
					Metrics:    defs,
				}},
			}
			b, err := json.Marshal(root)
			if err != nil {
				return nil, err
			}
			out.Write(b)
			out.WriteByte('\n')
		}
	}
	return out.Bytes(), nil
}
