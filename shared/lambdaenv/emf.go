package lambdaenv

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"sync"
	"time"

	"github.com/strandlog/strand/shared/passindex"
)

// EMFNamespace is the CloudWatch namespace of the metrics the settlement
// functions log in the embedded metric format.
const EMFNamespace = "strand"

// WindowEMF is one CloudWatch embedded metric format document (one log
// line: CloudWatch Logs extracts its metrics) of a function's pass index
// window cache after an invocation, with the dimension Function: the
// cache's bytes, objects and budget (-1: unbounded) as they are, its
// whole GETs, evictions and per-stream lookups read by range (objects,
// ranged GETs, their bytes) during the invocation (now minus before). The Lambdas'
// counterpart of the star's strand_window_cache_* series (design 014,
// "Window memory bound"; docs/operations.md, sizing the window cache).
func WindowEMF(function string, at time.Time, budget int64, before, now passindex.WindowStats) []byte {
	type metric struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	doc := map[string]any{
		"_aws": map[string]any{
			"Timestamp": at.UnixMilli(),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  EMFNamespace,
				"Dimensions": [][]string{{"Function"}},
				"Metrics": []metric{
					{"WindowCacheBytes", "Bytes"}, {"WindowCacheObjects", "Count"}, {"WindowCacheBudgetBytes", "Bytes"},
					{"WindowCacheGets", "Count"}, {"WindowCacheEvictions", "Count"},
					{"WindowRangedLookups", "Count"}, {"WindowRangedGets", "Count"}, {"WindowRangedBytes", "Bytes"},
				},
			}},
		},
		"Function":               function,
		"WindowCacheBytes":       now.Bytes,
		"WindowCacheObjects":     now.Objects,
		"WindowCacheBudgetBytes": budget,
		"WindowCacheGets":        now.Gets - before.Gets,
		"WindowCacheEvictions":   now.Evicted - before.Evicted,
		"WindowRangedLookups":    now.Ranged - before.Ranged,
		"WindowRangedGets":       now.RangedGets - before.RangedGets,
		"WindowRangedBytes":      now.RangedBytes - before.RangedBytes,
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic("lambdaenv: WindowEMF: " + err.Error()) // only plain maps, strings and numbers
	}
	return append(b, '\n')
}

// Handler is a settlement function's Lambda handler (every one takes its
// event raw).
type Handler func(ctx context.Context, raw json.RawMessage) (any, error)

// WithWindowMetrics wraps h so that each invocation ends with one
// WindowEMF line for w on out (the function's stdout, which Lambda sends
// to CloudWatch Logs), whether it failed or not. A nil w (the pass index
// off) returns h unchanged.
func WithWindowMetrics(function string, w *passindex.Window, out io.Writer, now func() time.Time, h Handler) Handler {
	if w == nil {
		return h
	}
	var mu sync.Mutex
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		before := w.Stats()
		res, err := h(ctx, raw)
		line := WindowEMF(function, now(), w.Budget(), before, w.Stats())
		mu.Lock()
		_, _ = out.Write(line) // a lost metric line must not fail the invocation
		mu.Unlock()
		return res, err
	}
}

// Metered is h with WithWindowMetrics on stdout and the real clock when
// the function runs with the pass index (passIndex) and a window.
func Metered(function string, passIndex bool, w *passindex.Window, h Handler) Handler {
	if !passIndex {
		return h
	}
	return WithWindowMetrics(function, w, os.Stdout, time.Now, h)
}
