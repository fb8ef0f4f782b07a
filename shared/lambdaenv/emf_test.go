package lambdaenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// checkEMF checks doc against the embedded metric format's rules that
// CloudWatch enforces (one directive; every dimension and metric a member
// of the root, dimensions strings, metrics numbers) and returns the root.
func checkEMF(t *testing.T, line []byte) map[string]any {
	t.Helper()
	if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
		t.Fatalf("not one log line: %q", line)
	}
	var root map[string]any
	if err := json.Unmarshal(line, &root); err != nil {
		t.Fatalf("not JSON: %v: %s", err, line)
	}
	aws, _ := root["_aws"].(map[string]any)
	if aws == nil {
		t.Fatalf("no _aws member: %s", line)
	}
	if ts, ok := aws["Timestamp"].(float64); !ok || ts <= 0 {
		t.Fatalf("_aws.Timestamp %v", aws["Timestamp"])
	}
	dirs, _ := aws["CloudWatchMetrics"].([]any)
	if len(dirs) != 1 {
		t.Fatalf("CloudWatchMetrics: %v", aws["CloudWatchMetrics"])
	}
	dir := dirs[0].(map[string]any)
	if dir["Namespace"] != EMFNamespace {
		t.Fatalf("namespace %v", dir["Namespace"])
	}
	for _, set := range dir["Dimensions"].([]any) {
		for _, d := range set.([]any) {
			if _, ok := root[d.(string)].(string); !ok {
				t.Fatalf("dimension %v is not a string member of the root: %s", d, line)
			}
		}
	}
	for _, m := range dir["Metrics"].([]any) {
		name := m.(map[string]any)["Name"].(string)
		if _, ok := root[name].(float64); !ok {
			t.Fatalf("metric %s is not a number member of the root: %s", name, line)
		}
	}
	return root
}

func TestWindowEMF(t *testing.T) {
	at := time.UnixMilli(1_764_633_600_000)
	line := WindowEMF("settle", at, 1536<<20, passindex.WindowStats{Gets: 10, Evicted: 2, Ranged: 1, RangedGets: 4, RangedBytes: 100},
		passindex.WindowStats{Objects: 7, Bytes: 4096, Gets: 13, Evicted: 5, Ranged: 3, RangedGets: 9, RangedBytes: 65636})
	root := checkEMF(t, line)
	want := map[string]float64{"WindowCacheBytes": 4096, "WindowCacheObjects": 7, "WindowCacheBudgetBytes": 1536 << 20, "WindowCacheGets": 3, "WindowCacheEvictions": 3,
		"WindowRangedLookups": 2, "WindowRangedGets": 5, "WindowRangedBytes": 65536}
	for k, v := range want {
		if root[k] != v {
			t.Errorf("%s = %v, want %v", k, root[k], v)
		}
	}
	if root["Function"] != "settle" || root["_aws"].(map[string]any)["Timestamp"] != float64(at.UnixMilli()) {
		t.Errorf("function %v, timestamp %v", root["Function"], root["_aws"].(map[string]any)["Timestamp"])
	}
}

// TestWithWindowMetrics runs a handler that reads a run through a real
// window over a bucket: the line after each invocation counts that
// invocation's GETs and evictions (a budget of one object: the second run
// evicts the first), also when the handler fails.
func TestWithWindowMetrics(t *testing.T) {
	ctx := context.Background()
	c := metastore.ChainID{Star: "star-0", Class: metastore.Express}
	bucket := objstore.NewMem("settled")
	for slot := uint64(0); slot < 2; slot++ {
		obj, err := format.AppendPassIndex(nil, format.PassIndex{Epoch: 1, FirstSlot: slot * 10, EndSlot: slot*10 + 10})
		if err != nil {
			t.Fatal(err)
		}
		if err := bucket.PutIfAbsent(ctx, format.RunIndexKey(c.Star, c.Class.String(), 1, slot*10), obj); err != nil {
			t.Fatal(err)
		}
	}
	one := passindex.DecodedBytes(&format.PassIndex{})
	w := &passindex.Window{Bucket: bucket, MaxBytes: one}
	fail := errors.New("boom")
	h := func(ctx context.Context, raw json.RawMessage) (any, error) {
		var slots []uint64
		if err := json.Unmarshal(raw, &slots); err != nil {
			return nil, err
		}
		for _, s := range slots {
			if _, err := w.Run(ctx, c, metastore.Cursor{Epoch: 1, Slot: s}); err != nil {
				return nil, err
			}
		}
		return nil, fail
	}
	var out bytes.Buffer
	clock := time.UnixMilli(1_764_633_600_000)
	m := WithWindowMetrics("trim", w, &out, func() time.Time { return clock }, h)
	for i, tc := range []struct {
		event      string
		gets, evic float64
	}{
		{`[0]`, 1, 0},     // a cold GET
		{`[0]`, 0, 0},     // cached
		{`[10, 0]`, 2, 2}, // each evicts the other
	} {
		out.Reset()
		if _, err := m(ctx, json.RawMessage(tc.event)); !errors.Is(err, fail) {
			t.Fatalf("invocation %d: err %v, want the handler's", i, err)
		}
		root := checkEMF(t, out.Bytes())
		if root["WindowCacheGets"] != tc.gets || root["WindowCacheEvictions"] != tc.evic || root["WindowCacheObjects"] != float64(1) || root["WindowCacheBudgetBytes"] != float64(one) {
			t.Errorf("invocation %d (%s): %s", i, tc.event, out.Bytes())
		}
	}
	// No window (the pass index off): the handler alone, no line.
	out.Reset()
	if _, err := WithWindowMetrics("trim", nil, &out, time.Now, h)(ctx, json.RawMessage(`[0]`)); !errors.Is(err, fail) || out.Len() != 0 {
		t.Fatalf("no window: err %v, wrote %q", err, out.Bytes())
	}
}
