package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
	"github.com/strandlog/strand/shared/star"
)

func tinyConfig(t *testing.T) Config {
	cfg := Defaults()
	cfg.Classes = []metastore.Class{metastore.Express}
	cfg.Producers, cfg.Streams = []int{2}, []int{3}
	cfg.Duration, cfg.Warmup = 600*time.Millisecond, 100*time.Millisecond
	cfg.ExpressPut = Latency{2 * time.Millisecond, 6 * time.Millisecond}
	cfg.MetaWrite = Latency{time.Millisecond, 3 * time.Millisecond}
	cfg.Sample = 50 * time.Millisecond
	cfg.PlotDir = t.TempDir()
	return cfg
}

// TestTinyInProcRun: a short in-process run reports sane figures: data
// flowed, every percentile is ordered, the floor never exceeds the ack
// latency it is part of, PUTs per GiB match K copies of the flights, the
// metastore was used only by the absorb, the baseline ran, the cost is
// positive, and plots and JSON come out. The absorb writes its refs
// after release events (star.Config.ReleaseEventInterval), so on a loaded
// machine the nominal window may end before the first: the window's end
// waits for a PutRefs, up to a generous deadline, rather than assuming one
// lands in time.
func TestTinyInProcRun(t *testing.T) {
	cfg := tinyConfig(t)
	deadline := time.Now().Add(30 * time.Second)
	cfg.endWhen = func(w metacount.Counts) bool {
		return w.Of(metacount.PutRefs) > 0 || time.Now().After(deadline)
	}
	var log bytes.Buffer
	rs, err := Run(context.Background(), cfg, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(rs) != 1 {
		t.Fatalf("%d results", len(rs))
	}
	r := rs[0]
	if r.MBps <= 0 || r.RecordsPerSec <= 0 || r.Batches == 0 || r.Errors != 0 {
		t.Fatalf("no throughput: %+v", r)
	}
	for _, p := range []Percentiles{r.Ack, r.Floor, r.QuorumPut, r.CutWait} {
		if p.N == 0 || p.P50 > p.P99 || p.P99 > p.P999 || p.P999 > p.Max {
			t.Fatalf("percentiles out of order or empty: %+v", p)
		}
	}
	if want := ms(star.Defaults().Express.FlushDeadline); r.FlushDeadlineMs != want {
		t.Fatalf("flush deadline %g ms reported, the star ran %g", r.FlushDeadlineMs, want)
	}
	if r.Floor.N != r.Ack.N {
		t.Fatalf("floor known for %d of %d batches", r.Floor.N, r.Ack.N)
	}
	// The W-th PUT is drawn from the model: at least its minimum.
	if r.QuorumPut.P50 < 0.5 {
		t.Fatalf("W-th PUT p50 %.3f ms is below the latency model", r.QuorumPut.P50)
	}
	// ack = floor + overhead per batch, and the overhead is never negative
	// beyond clock noise: the floor is a lower bound on the ack.
	if r.Overhead.P50 < -0.05 || r.Floor.P50 > r.Ack.P50+0.05 || r.Floor.Max > r.Ack.Max+0.05 {
		t.Fatalf("floor above ack: floor %+v ack %+v overhead %+v", r.Floor, r.Ack, r.Overhead)
	}
	if r.OrderedOverhead.P50 > r.Overhead.P50+1e-9 {
		t.Fatalf("ordered overhead %+v above overhead %+v", r.OrderedOverhead, r.Overhead)
	}
	// Express K=3: every flight is three PUTs.
	if r.Flights == 0 || r.PutsPerGB <= 0 {
		t.Fatalf("flights %d puts/GB %f", r.Flights, r.PutsPerGB)
	}
	if r.MetaOps["PutRefs"] == 0 || r.MetaOps["CreateStream"] != 0 {
		t.Fatalf("metastore ops %v: want absorb traffic only", r.MetaOps)
	}
	if r.Cost == nil || r.Cost.Total <= 0 || r.Cost.ChainPuts <= 0 {
		t.Fatalf("cost %+v", r.Cost)
	}
	// Item writes: at least one per ref put, and every item written costs
	// at least one WRU (two in a transaction).
	if r.MetaItemWritesPerSec < r.MetaWritesPerSec || r.MetaWRUPerSec < r.MetaItemWritesPerSec || r.MetaRRUPerSec <= 0 {
		t.Fatalf("metastore %.1f item writes/s, %.1f WRU/s, %.1f RRU/s for %.1f write calls/s", r.MetaItemWritesPerSec, r.MetaWRUPerSec, r.MetaRRUPerSec, r.MetaWritesPerSec)
	}
	if sh := r.Cost.MetastoreShare; sh <= 0 || sh >= 1 || math.Abs(sh-r.Cost.Metastore/r.Cost.Total) > 1e-12 {
		t.Fatalf("metastore share %g of %+v", sh, r.Cost)
	}
	if h := r.Heap; h == nil || h.BaseMiB <= 0 || h.OpenMiB <= 0 || h.EndMiB <= 0 {
		t.Fatalf("heap figures %+v", h)
	}
	// The process's CPU over the window, per GiB acked (issue 36).
	if gib := r.MBps * r.Seconds * 1e6 / (1 << 30); r.CPUSeconds <= 0 || math.Abs(r.CPUSecondsPerGB*gib-r.CPUSeconds) > 1e-6*r.CPUSeconds {
		t.Fatalf("CPU %.3f s, %.3f per GiB for %.4f GiB acked", r.CPUSeconds, r.CPUSecondsPerGB, gib)
	}
	b := r.Baseline
	if b == nil || b.MBps <= 0 || b.MetaWritesPerSec <= 0 || b.PutsPerGBRatio <= 1 {
		t.Fatalf("baseline %+v", b)
	}
	for _, f := range []string{r.Name + "-latency.svg", r.Name + "-throughput.svg"} {
		data, err := os.ReadFile(filepath.Join(cfg.PlotDir, f))
		if err != nil || !strings.HasPrefix(string(data), "<svg") || !strings.Contains(string(data), "</svg>") {
			t.Fatalf("plot %s: %v", f, err)
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, rs); err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back[0]["mb_per_s"] == nil || back[0]["overhead"] == nil {
		t.Fatalf("json: %v %v", err, back)
	}
	var txt bytes.Buffer
	if err := WriteText(&txt, rs); err != nil || !strings.Contains(txt.String(), "overhead") || !strings.Contains(txt.String(), "CPU-s per GiB acked") {
		t.Fatalf("text: %v\n%s", err, txt.String())
	}
	t.Log(txt.String())
}

// TestTinyPassIndexRun: with PassIndex (in-process and through the API)
// the absorb writes no ref: its metastore writes are BeginAbsorb and
// AdvanceCursor, two item writes a pass, whatever the streams it touched,
// and each pass puts one index object, priced as an S3 Standard PUT.
func TestTinyPassIndexRun(t *testing.T) {
	for _, mode := range []string{ModeInProc, ModeAPI} {
		t.Run(mode, func(t *testing.T) {
			cfg := tinyConfig(t)
			cfg.Mode, cfg.PassIndex, cfg.Baseline, cfg.PlotDir = mode, true, false, ""
			cfg.Streams, cfg.BatchBytes, cfg.RecordBytes = []int{200}, 100, []int{100}
			var log bytes.Buffer
			rs, err := Run(context.Background(), cfg, &log)
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			r := rs[0]
			if !r.PassIndex || !strings.HasSuffix(r.Name, "-pass-index") {
				t.Fatalf("result %q (pass index %v) does not say it ran on the pass index", r.Name, r.PassIndex)
			}
			passes := r.MetaOps["BeginAbsorb"]
			if r.Batches == 0 || passes == 0 || r.MetaOps["PutRefs"] != 0 {
				t.Fatalf("%d batches, metastore ops %v: want passes and no PutRefs", r.Batches, r.MetaOps)
			}
			if items := r.MetaItemWritesPerSec * r.Seconds; items > 3*float64(passes) {
				t.Fatalf("%.0f item writes for %d passes of %d batches: the index should cost 2 a pass", items, passes, r.Batches)
			}
			if c := r.Cost; c == nil || c.IndexPuts <= 0 || c.Total < c.IndexPuts+c.Metastore {
				t.Fatalf("cost %+v: want the index PUTs priced and in the total", c)
			}
		})
	}
}

// TestTinyPassIndexSettleRun: with PassIndex in-process, settle (runs,
// packs, flush) and trim run inside the measured window and are counted:
// steps, packed streams and flushes (a short FlushAge), their SettleRef
// items in the metastore figures, their S3 requests and GETs in the cost.
func TestTinyPassIndexSettleRun(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.PassIndex, cfg.Baseline, cfg.PlotDir = true, false, ""
	cfg.Streams, cfg.BatchBytes, cfg.RecordBytes = []int{50}, 100, []int{100}
	cfg.Duration = 3 * time.Second
	cfg.SettleEvery, cfg.FlushAge = 100*time.Millisecond, 100*time.Millisecond
	var log bytes.Buffer
	rs, err := Run(context.Background(), cfg, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	r := rs[0]
	s := r.Settle
	// Flushes count when a step ends, SettleRef as it writes: a window edge
	// may cut a step, so SettleRef is the one asked for.
	if s == nil || s.Steps == 0 || s.Packed == 0 || s.SettleRefs == 0 || s.Requests == 0 || s.Errors != 0 {
		t.Fatalf("settle in the window: %+v\n%s", s, log.String())
	}
	passes := r.MetaOps["BeginAbsorb"]
	if items := r.MetaItemWritesPerSec * r.Seconds; items < float64(2*passes+s.SettleRefs) {
		t.Fatalf("%.0f item writes for %d passes and %d SettleRef: settle's writes not counted", items, passes, s.SettleRefs)
	}
	if c := r.Cost; c == nil || !c.SettleMeasured || c.SettlePuts <= 0 || c.Gets <= 0 || c.Total < c.SettlePuts+c.Gets+c.IndexPuts+c.Metastore {
		t.Fatalf("cost %+v: want settle's requests measured, priced and in the total", c)
	}
	var rep bytes.Buffer
	if err := WriteText(&rep, rs); err != nil || !strings.Contains(rep.String(), "settle (every") {
		t.Fatalf("no settle line in the report (%v):\n%s", err, rep.String())
	}
}

func TestValidate(t *testing.T) {
	for _, mut := range []func(*Config){
		func(c *Config) { c.Mode = "x" },
		func(c *Config) { c.Mode = ModeRemote },
		func(c *Config) { c.Producers = nil },
		func(c *Config) { c.ExpressW = 4 },
		func(c *Config) { c.ExpressPut = Latency{10 * time.Millisecond, time.Millisecond} },
		func(c *Config) { c.RecordBytes = []int{0} },
		func(c *Config) { c.ExpressFlush = []time.Duration{-time.Millisecond} },
		func(c *Config) { c.PassIndex, c.Mode, c.Endpoint = true, ModeRemote, "http://x" },
		func(c *Config) { c.PassIndex, c.FlushAge = true, -time.Second },
	} {
		c := Defaults()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
	if err := Defaults().Validate(); err != nil {
		t.Fatal(err)
	}
}

// The flush deadline is a dimension of its own class's runs only, and each
// point's name says which deadline it ran.
func TestFlushDeadlineDimension(t *testing.T) {
	c := Defaults()
	c.RatesMBps = []float64{1, 100}
	c.ExpressFlush = []time.Duration{2 * time.Millisecond, 8 * time.Millisecond}
	ex := c.ratePoints(point{producers: 1, streams: 1, recordBytes: 10, class: metastore.Express})
	var names []string
	for _, p := range ex {
		names = append(names, p.name(ModeInProc))
	}
	want := []string{
		"inproc-express-p1-s1-r10-1MBps-f2ms", "inproc-express-p1-s1-r10-1MBps-f8ms",
		"inproc-express-p1-s1-r10-100MBps-f2ms", "inproc-express-p1-s1-r10-100MBps-f8ms",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("express points %v, want %v", names, want)
	}
	st := c.ratePoints(point{producers: 1, streams: 1, recordBytes: 10, class: metastore.Standard})
	if len(st) != 2 || st[0].flush != 0 || st[0].name(ModeAPI) != "api-standard-p1-s1-r10-1MBps" {
		t.Fatalf("standard points %+v: want the star's default deadline", st)
	}
	// The deadline reaches the star and the result.
	e := newEnv(c, ex[1])
	if e.starCfg.Express.FlushDeadline != 8*time.Millisecond {
		t.Fatalf("star flush deadline %s", e.starCfg.Express.FlushDeadline)
	}
	if d := newEnv(c, st[0]).starCfg.Standard.FlushDeadline; d != star.Defaults().Standard.FlushDeadline || d == 0 {
		t.Fatalf("standard deadline %s, want the default", d)
	}
}

func TestCostArithmetic(t *testing.T) {
	p := DefaultPrices()
	// 1 GiB in 1024 flights of 1 MiB, K=3: 3072 PUTs.
	c := p.cost(true, Counted{GB: 1, Seconds: 1, ChainPuts: 3072, ChainBytes: 3 << 30, ChainPutsOv: 3 << 30, K: 3})
	if want := 3072 * 0.00113 / 1000; abs(c.ChainPuts-want) > 1e-12 {
		t.Fatalf("PUTs %v want %v", c.ChainPuts, want)
	}
	if want := 3 * 0.0032; abs(c.ChainUpload-want) > 1e-12 {
		t.Fatalf("upload %v want %v", c.ChainUpload, want)
	}
	if want := 2 * 0.01; abs(c.CrossAZ-want) > 1e-12 {
		t.Fatalf("cross-AZ %v want %v", c.CrossAZ, want)
	}
	s := p.cost(false, Counted{GB: 1, Seconds: 1, ChainPuts: 128, ChainBytes: 1 << 30, K: 1})
	if want := 128 * 0.005 / 1000; abs(s.ChainPuts-want) > 1e-12 || s.CrossAZ != 0 || s.ChainUpload != 0 {
		t.Fatalf("standard %+v", s)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestSettlePace: the report says what settle settled in the window and
// how far behind the absorb's checkpoint it ended. With a period shorter
// than the window settle keeps up with 2 MB/s; with a period longer than
// the window (5 s, the default before issue 36) it never ran, and the
// report shows the backlog it left, which is why `strand bench` said "0
// steps" (before, it said nothing more).
func TestSettlePace(t *testing.T) {
	for _, every := range []time.Duration{200 * time.Millisecond, 5 * time.Second} {
		cfg := tinyConfig(t)
		cfg.PassIndex, cfg.Baseline, cfg.PlotDir = true, false, ""
		cfg.Duration = 1500 * time.Millisecond
		cfg.RatesMBps = []float64{2}
		cfg.SettleEvery = every
		var log bytes.Buffer
		rs, err := Run(context.Background(), cfg, &log)
		if err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		s := rs[0].Settle
		if s == nil || s.Errors != 0 || s.BehindSlots < 0 || (s.BehindSlots == 0) != (s.BehindMB == 0) {
			t.Fatalf("every %v: settle figures %+v", every, s)
		}
		if every < cfg.Duration {
			// Keeping up: it settled, and at the end it is behind by at
			// most a second's ingest (a period, 0.4 MB, and a pass, with
			// room for a loaded machine): far from the 3 MB written.
			if s.Steps == 0 || s.Slots == 0 || s.MB <= 0 || s.MBps <= 0 || s.BehindMB > 2 {
				t.Fatalf("every %v: %+v\n%s", every, s, log.String())
			}
		} else {
			// No step yet: the window's whole ingest is still to settle.
			if s.Steps != 0 || s.MB != 0 || s.BehindSlots == 0 || s.BehindMB < 1 {
				t.Fatalf("a period past the window: %+v\n%s", s, log.String())
			}
		}
		var rep bytes.Buffer
		if err := WriteText(&rep, rs); err != nil || !strings.Contains(rep.String(), "settle's pace") {
			t.Fatalf("no settle pace line in the report (%v):\n%s", err, rep.String())
		}
	}
}
