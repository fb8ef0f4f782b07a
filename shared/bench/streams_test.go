package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/metastore"
)

// Runs that differ only by stream count make one table (a row per count,
// ascending) and one plot; a lone count or a read run makes none.
func TestStreamsTableAndPlot(t *testing.T) {
	mk := func(streams int, writes float64) Result {
		pt := point{producers: 16, streams: streams, recordBytes: 100, rate: 2, class: metastore.Express}
		return Result{Name: pt.name(ModeInProc), Mode: ModeInProc, Streams: streams, Seconds: 10, Batches: 200000, PutsPerGB: 3e5,
			MetaItemWritesPerSec: writes, MetaWRUPerSec: 2 * writes, Cost: &Cost{Total: 1, Metastore: 0.5, MetastoreShare: 0.5, MetastorePerH: writes / 100},
			Heap: &HeapFigures{OpenMiB: float64(streams) / 1000, EndMiB: float64(streams) / 500}}
	}
	other := mk(10, 1)
	other.Name = strings.Replace(other.Name, "r100", "r200", 1)
	rs := []Result{mk(100000, 1350), mk(1000, 500), other, mk(10000, 1300), {Name: "inproc-catchup-express-s5-r100-x1", Read: &ReadStats{}}}
	gs := streamGroups(rs)
	if len(gs) != 1 || len(gs[0]) != 3 || gs[0][0].Streams != 1000 || gs[0][2].Streams != 100000 {
		t.Fatalf("groups %v", gs)
	}
	var b strings.Builder
	writeStreamsTables(&b, rs)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	var rows []string
	for _, l := range lines {
		if strings.HasPrefix(l, "| 1") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 3 || !strings.HasPrefix(rows[0], "| 1000 |") || !strings.HasPrefix(rows[2], "| 100000 |") || !strings.Contains(rows[2], "| 1350.0 | 2700.0 |") {
		t.Fatalf("table:\n%s", b.String())
	}
	dir := t.TempDir()
	if err := writeStreamsPlots(dir, rs); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "inproc-express-p16-streams-r100-2MBps.svg"))
	if err != nil || !strings.Contains(string(data), "metastore item writes/s") || strings.Count(string(data), "<circle") != 3*5 {
		t.Fatalf("plot: %v\n%s", err, data)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d plots, want 1", len(ents))
	}
}

// The random stream order spreads a producer's batches over the streams
// (a window touches many), the sweep takes them in turn; both stay in
// range, and a run in random order is named apart.
func TestStreamOrder(t *testing.T) {
	cfg := Defaults()
	pt := point{streams: 100000}
	seen := map[int]bool{}
	rnd := cfg
	rnd.StreamOrder = OrderRandom
	pick := streamPicker(rnd, pt, 3)
	for n := range 1000 {
		s := pick(n)
		if s < 0 || s >= pt.streams {
			t.Fatalf("stream %d of %d", s, pt.streams)
		}
		seen[s] = true
	}
	if len(seen) < 990 {
		t.Fatalf("1000 random picks hit %d streams", len(seen))
	}
	sweep := streamPicker(cfg, pt, 3)
	for n := range 1000 {
		if s := sweep(n); s != 3+n {
			t.Fatalf("sweep: batch %d to stream %d", n, s)
		}
	}
	if orderSuffix(rnd) != "-random" || orderSuffix(cfg) != "" {
		t.Fatal("run names do not tell the orders apart")
	}
	bad := cfg
	bad.StreamOrder = "zigzag"
	if err := bad.Validate(); err == nil {
		t.Fatal("stream order zigzag accepted")
	}
}
