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

// encode returns the documents for metrics at now, one JSON object per line. A document
// has one value per dimension, so the metrics of each operation (in the order first
// recorded) have documents of their own. The metrics of none join the first operation's
// documents under a directive of their own, where no name clashes and the metrics stay
// within [MaxMetrics]: a function of one guard writes one document per flush, batches
// included.
func encode(cfg config, now time.Time, metrics []*metric) ([]byte, error) {
	var ops []string
	byOp := map[string][]*metric{}
	for _, m := range metrics {
		if _, ok := byOp[m.op]; !ok {
			ops = append(ops, m.op)
		}
		byOp[m.op] = append(byOp[m.op], m)
	}
	var docs, opless []map[string]any
	firstOp := -1
	for _, op := range ops {
		dims := cfg.dims
		if op != "" {
			dims = append(dims[:len(dims):len(dims)], dimension{DimensionOperation, op})
		}
		set := documentsOf(cfg.namespace, dims, now, byOp[op])
		if op == "" {
			opless = set
			continue
		}
		if firstOp < 0 {
			firstOp = len(docs)
		}
		docs = append(docs, set...)
	}
	for k, doc := range opless {
		if firstOp < 0 || k >= len(docs)-firstOp || !merge(docs[firstOp+k], doc) {
			docs = append(docs, doc)
		}
	}
	var out bytes.Buffer
	for _, doc := range docs {
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		out.Write(b)
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// merge adds the metrics and directive of document src to document dst, if no member of
// src but its dimensions' is in dst already and dst stays within [MaxMetrics]; it reports
// whether it did.
func merge(dst, src map[string]any) bool {
	dm, sm := dst[awsKey].(metadata), src[awsKey].(metadata)
	if len(dm.CloudWatchMetrics[0].Metrics)+len(sm.CloudWatchMetrics[0].Metrics) > MaxMetrics {
		return false
	}
	shared := map[string]bool{awsKey: true}
	for _, set := range sm.CloudWatchMetrics[0].Dimensions {
		for _, name := range set {
			shared[name] = true
		}
	}
	for name := range src {
		if _, clash := dst[name]; clash && !shared[name] {
			return false
		}
	}
	for name, v := range src {
		if !shared[name] {
			dst[name] = v
		}
	}
	dm.CloudWatchMetrics = append(dm.CloudWatchMetrics, sm.CloudWatchMetrics...)
	dst[awsKey] = dm
	return true
}

// documentsOf returns the documents for metrics with dimensions dims. The metrics are cut
// into groups of [MaxMetrics], and each group into documents of at most [MaxValues]
// values per metric: document k of a group carries the k-th hundred values of each
// metric that has that many.
func documentsOf(namespace string, dims []dimension, now time.Time, metrics []*metric) []map[string]any {
	dimSet := make([]string, len(dims)) // one dimension set of every dimension
	for i, d := range dims {
		dimSet[i] = d.name
	}
	var docs []map[string]any
	for len(metrics) > 0 {
		group := metrics[:min(len(metrics), MaxMetrics)]
		metrics = metrics[len(group):]
		for k := 0; ; k++ {
			root := make(map[string]any, 1+len(dims)+len(group))
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
			for _, d := range dims {
				root[d.name] = d.value
			}
			root[awsKey] = metadata{
				Timestamp: now.UnixMilli(),
				CloudWatchMetrics: []directive{{
					Namespace:  namespace,
					Dimensions: [][]string{dimSet},
					Metrics:    defs,
				}},
			}
			docs = append(docs, root)
		}
	}
	return docs
}
