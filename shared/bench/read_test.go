package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/metastore"
)

func tinyReadConfig(t *testing.T, mode string) Config {
	cfg := tinyConfig(t)
	cfg.Mode = mode
	cfg.Baseline = false
	cfg.Producers, cfg.Streams = []int{2}, []int{2}
	cfg.Workloads = []string{WorkTail, WorkCatchup}
	cfg.Readers = []int{2}
	cfg.BacklogMB, cfg.SettledPct = 4, 50
	cfg.TailRateMBps = 2
	cfg.ExpressGet = GetModel{FirstByte: Latency{time.Millisecond, 3 * time.Millisecond}, MBps: 500}
	cfg.StandardGet = GetModel{FirstByte: Latency{2 * time.Millisecond, 6 * time.Millisecond}, MBps: 500}
	return cfg
}

// The read workloads run in-process and through the API: every reader
// sees every record of its stream once, in order, up to the tail (the
// checker fails the run otherwise); the catch-up read half its backlog
// from settled objects and half from transit slots; the tail reports an
// end-to-end latency no lower than the ack's floor of one quorum PUT.
//
// With the pass index the settled half is in runs and packs (no ref at
// the default flush age), the rest in passes: the readers find both
// through the index window.
func TestReadWorkloads(t *testing.T) {
	for _, tc := range []struct {
		mode      string
		passIndex bool
	}{{ModeInProc, false}, {ModeAPI, false}, {ModeInProc, true}, {ModeAPI, true}} {
		name := tc.mode
		if tc.passIndex {
			name += "/pass-index"
		}
		t.Run(name, func(t *testing.T) {
			mode := tc.mode
			cfg := tinyReadConfig(t, mode)
			cfg.PassIndex = tc.passIndex
			var log bytes.Buffer
			rs, err := Run(context.Background(), cfg, &log)
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			if len(rs) != 2 {
				t.Fatalf("%d results, want tail and catch-up", len(rs))
			}
			tail, cu := rs[0], rs[1]
			if tail.PassIndex != tc.passIndex || cu.PassIndex != tc.passIndex ||
				strings.HasSuffix(cu.Name, "-pass-index") != tc.passIndex {
				t.Fatalf("results %s and %s on the pass index: %v %v, want %v", tail.Name, cu.Name, tail.PassIndex, cu.PassIndex, tc.passIndex)
			}
			if tail.Read == nil || tail.Read.Workload != WorkTail || cu.Read == nil || cu.Read.Workload != WorkCatchup {
				t.Fatalf("workloads %+v %+v", tail.Read, cu.Read)
			}
			e := tail.Read.EndToEnd
			if e.N == 0 || e.P50 < 0.5 || e.P50 > e.P99 || tail.Ack.N == 0 {
				t.Fatalf("end-to-end %+v ack %+v", e, tail.Ack)
			}
			// Each record is delivered to both readers of its stream.
			if tail.Read.Records < 2*tail.Records {
				t.Fatalf("%d deliveries of %d records acked in the window to 2 readers each", tail.Read.Records, tail.Records)
			}
			c := cu.Read
			wantRecs := int64(2 * (cfg.BacklogMB * 1e6 / 1024)) // the backlog (across the streams) x 2 readers, at least
			if c.Records < wantRecs || c.MBps <= 0 || c.ReaderMBpsMin <= 0 {
				t.Fatalf("catch-up %+v: want at least %d records delivered", c, wantRecs)
			}
			if c.SettledGetsPerGB <= 0 || c.ChainGetsPerGB <= 0 {
				t.Fatalf("catch-up GETs per GiB: settled %.1f chain %.1f: want both parts of the backlog read", c.SettledGetsPerGB, c.ChainGetsPerGB)
			}
			if c.MetaReadsPerGB <= 0 || c.Cost.Total <= 0 || c.Cost.SettledGets <= 0 {
				t.Fatalf("catch-up metastore reads %.1f/GiB cost %+v", c.MetaReadsPerGB, c.Cost)
			}
			svg, err := os.ReadFile(filepath.Join(cfg.PlotDir, tail.Name+"-latency.svg"))
			if err != nil || !strings.Contains(string(svg), "end-to-end") {
				t.Fatalf("tail plot without the end-to-end series: %v", err)
			}
			var txt bytes.Buffer
			if err := WriteText(&txt, rs); err != nil || !strings.Contains(txt.String(), "end-to-end") || !strings.Contains(txt.String(), "read cost") {
				t.Fatalf("text: %v\n%s", err, txt.String())
			}
			t.Log(log.String())
		})
	}
}

// A catch-up through the API fetches each byte about once, however slow
// the GETs are against the hedge: GETs of 60-90 ms to the first byte (the
// hedge of a transit GET is 20 ms plus its body's time at 50 MB/s) made
// every read-ahead GET ask a second and a third copy, about 2 bytes
// fetched per byte read here (1.47 through the API on the loaded machine,
// where the first copy's answer waited for CPU past the hedge). The
// read-ahead now hedges only after prefetchHedge (a second); the location
// a read waits on keeps the short hedge. A count, not a time: bytes the
// chain and settled buckets returned over body bytes delivered.
func TestAPICatchupFetchesEachByteOnce(t *testing.T) {
	cfg := tinyReadConfig(t, ModeAPI)
	cfg.Workloads = []string{WorkCatchup}
	cfg.Readers = []int{1}
	cfg.ExpressGet = GetModel{FirstByte: Latency{60 * time.Millisecond, 90 * time.Millisecond}, MBps: 500}
	var log bytes.Buffer
	rs, err := Run(context.Background(), cfg, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(rs) != 1 || rs[0].Read == nil {
		t.Fatalf("results %+v", rs)
	}
	c := rs[0].Read
	t.Logf("%.3f bytes fetched per byte read, %.0f chain GETs/GiB", c.GetBytesPerByte, c.ChainGetsPerGB)
	if c.GetBytesPerByte > 1.1 || c.GetBytesPerByte < 0.95 {
		t.Fatalf("%.3f bytes fetched per byte read: want about 1", c.GetBytesPerByte)
	}
}

// The checker refuses a skipped or repeated record.
func TestCheckerOrder(t *testing.T) {
	c := &checker{now: time.Now}
	for _, seq := range []uint64{0, 1, 2} {
		if err := c.record(seq, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.record(2, nil); !errors.Is(err, ErrOrder) {
		t.Fatalf("repeat: %v", err)
	}
	if err := c.record(4, nil); !errors.Is(err, ErrOrder) {
		t.Fatalf("skip: %v", err)
	}
}

func TestReadPoints(t *testing.T) {
	c := Defaults()
	c.Workloads = []string{WorkFanout}
	ps := c.readPoints(point{producers: 4, streams: 16, recordBytes: 1024, class: metastore.Express})
	var names []string
	for _, p := range ps {
		names = append(names, p.name(ModeInProc))
	}
	want := "inproc-tail-express-p4-s1-r1024-8MBps-x1 inproc-tail-express-p4-s1-r1024-8MBps-x10 inproc-tail-express-p4-s1-r1024-8MBps-x100 " +
		"inproc-catchup-express-s1-r1024-x1 inproc-catchup-express-s1-r1024-x10 inproc-catchup-express-s1-r1024-x100"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("fan-out points\n%s\nwant\n%s", got, want)
	}
	c.Workloads = []string{"read"}
	if err := c.Validate(); err == nil {
		t.Fatal("accepted workload read")
	}
	c.Workloads, c.RecordBytes = []string{WorkTail}, []int{4}
	if err := c.Validate(); err == nil {
		t.Fatal("accepted 4-byte records for a tail (no room for the stamp)")
	}
}

// The checker records every stamped record's latency from its batch's
// arrival, runs of equal stamps at once, and only stamps in the window.
func TestCheckerLatencyRuns(t *testing.T) {
	base := time.Unix(1000, 0)
	now := base.Add(10 * time.Millisecond)
	c := &checker{e2e: newHist(0), from: base, to: base.Add(time.Second), now: func() time.Time { return now }}
	stamp := func(at time.Time) []byte { return binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano())) }
	c.arrive()
	for seq, at := range []time.Time{base, base, base, base.Add(4 * time.Millisecond), base.Add(-time.Millisecond)} {
		if err := c.record(uint64(seq), stamp(at)); err != nil {
			t.Fatal(err)
		}
	}
	c.flush()
	if n := c.e2e.h.TotalCount(); n != 4 {
		t.Fatalf("recorded %d latencies, want 4 (the stamp before the window is not counted)", n)
	}
	if got, want := c.e2e.sum, 3*10*time.Millisecond+6*time.Millisecond; got != want {
		t.Fatalf("latency sum %v, want %v", got, want)
	}
	if m := c.e2e.h.Max(); m < int64(10*time.Millisecond)*999/1000 || m > int64(10*time.Millisecond)*1001/1000 {
		t.Fatalf("max %d ns, want about 10 ms", m)
	}
}
