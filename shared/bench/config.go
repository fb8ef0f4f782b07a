package bench

import (
	"errors"
	"fmt"
	"time"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
	"github.com/strandlog/strand/shared/star"
)

// Modes of a run.
const (
	ModeInProc = "inproc"
	ModeAPI    = "api"
	ModeRemote = "remote"
)

// Workloads.
const (
	WorkWrite   = "write"   // producers only: ack latency, throughput, cost
	WorkTail    = "tail"    // tailing readers while producers append: end-to-end latency
	WorkCatchup = "catchup" // readers from seq 0 over a backlog: MB/s, GETs and metastore reads per GB
	WorkFanout  = "fanout"  // tail and catch-up with 1, 10, 100 readers of one stream
)

// Stream orders (Config.StreamOrder).
const (
	OrderSweep  = "sweep"
	OrderRandom = "random"
)

// DefaultSettleEvery is the period of settle and trim inside the measured
// window with the pass index (Config.SettleEvery). In-process the chain's
// unsettled slots are the bench's memory (about rate x period, as refs
// mode's janitor frees every 100 ms): at 5 s the first step came after
// 2 GB or more of backlog at full speed and did not finish in a 10 s
// window (issue 36).
const DefaultSettleEvery = time.Second

// ErrConfig: the configuration cannot run.
var ErrConfig = errors.New("bench: invalid configuration")

// Latency is a lognormal latency model given by its median and 0.99
// quantile (objstore.Injector.SetLatency).
type Latency struct {
	P50, P99 time.Duration
}

func (l Latency) String() string { return fmt.Sprintf("p50 %s p99 %s", l.P50, l.P99) }

// Config is one invocation of the benchmark: the lists are the matrix.
type Config struct {
	Mode     string // inproc, api or remote
	Endpoint string // remote only
	Token    string // remote only

	Producers   []int
	Streams     []int
	RecordBytes []int // record body size
	Classes     []metastore.Class
	RatesMBps   []float64 // offered load per run; 0 = as fast as acks allow

	BatchBytes int // target batch size: records per batch = BatchBytes / RecordBytes, 1..1000
	// StreamOrder is how producers pick each batch's stream: OrderSweep
	// (""; producer p's n-th batch goes to stream (p+n) mod streams, so a
	// short window touches few streams) or OrderRandom (uniform, seeded:
	// a window touches up to one stream per batch).
	StreamOrder string
	Inflight    int // batches outstanding per producer
	Duration    time.Duration
	Warmup      time.Duration // excluded from every figure

	// PUT latency models per class (every bucket of the set draws
	// independently), and the naive baseline's metastore write.
	ExpressPut, StandardPut, MetaWrite Latency
	ExpressK, ExpressW                 int
	// GET models (read workloads): the chain buckets of each class, and
	// the settled bucket (S3 Standard).
	ExpressGet, StandardGet GetModel

	// Workloads to run (WorkWrite, WorkTail, WorkCatchup, WorkFanout);
	// empty: write only.
	Workloads []string
	// Readers per stream of the tail and catch-up workloads (list), and
	// readers of the one stream of the fan-out workload (list).
	Readers, FanoutReaders []int
	// Catch-up backlog across the streams, in MB (10^6 bytes of bodies),
	// and the share of it settled before it is read (the rest stays in
	// transit slots).
	BacklogMB  int
	SettledPct int
	// ReadWindow, if set, is called as each catch-up read window begins
	// (true) and ends (false): strand bench --cpuprofile-read profiles the
	// reads alone, not the backlog's writing and settling.
	ReadWindow func(begin bool) `json:"-"`
	// WriteWindow, if set, is called as each write window of a star in
	// this process (in-process or ModeAPI) begins (true) and ends
	// (false): `strand bench --trace` traces the first.
	WriteWindow func(begin bool) `json:"-"`
	// Offered rate of the tail and fan-out producers, MB/s in all.
	TailRateMBps float64

	// Star tuning (zero: star.Defaults()). The flush deadlines are a
	// matrix dimension of their class's runs: the cut policy trades ack
	// latency against PUTs per GB and head-of-line waits (ADR 0038).
	ExpressFlush, StandardFlush     []time.Duration
	ExpressFlightKiB, StandardKiB   int
	ExpressIdleCut, StandardIdleCut bool // defaults: the star's
	ReleaseEventInterval            time.Duration

	Baseline bool
	// Idempotent: in-process producers append with a producer id and batch
	// seq (exactly-once appends), to price the dedupe table.
	Idempotent bool
	// PassIndex runs the star on the pass index (design 014;
	// node.Config.NoPassIndex false; the CLI's default for its own
	// star): one index object per pass in the settled bucket (priced as
	// S3 Standard PUTs) instead of one ref per stream. In-process or with
	// --api; the read workloads settle their backlog into runs and packs.
	PassIndex bool
	// SettleEvery, with PassIndex in-process: settle (runs, packs and
	// flush, design 014 level 1) and trim run on this period inside the
	// measured window, over the counted metastore and buckets, in place of
	// the janitor, so that item writes, PUTs and GETs are end to end
	// (0: DefaultSettleEvery; < 0: the janitor, settlement out of the
	// window). FlushBytes and FlushAge are settle's (0: its defaults).
	SettleEvery time.Duration
	FlushBytes  int64
	FlushAge    time.Duration
	// Fanout is settle's merge of level-1 runs (design 014, level 2; 0:
	// its default).
	Fanout  int
	Prices  Prices
	PlotDir string // "" writes no plots
	Seed    int64
	Sample  time.Duration // timeline resolution

	// endWhen, if set (tests), holds a measured window's end until it
	// reports true of the metastore calls counted since the window began:
	// a test waits for what it asserts instead of assuming the window is
	// long enough for it on a loaded machine. It is not a run's figure:
	// the rates still divide by the nominal window.
	endWhen func(window metacount.Counts) bool
}

// Defaults are the documented defaults. The latency models are
// assumptions calibrated to published figures (docs/performance/ingest.md):
// S3 Express One Zone PUTs in single-digit milliseconds (p50 5 ms, p99
// 15 ms), S3 Standard PUTs in tens of milliseconds with a p99 in the low
// hundreds (p50 40 ms, p99 150 ms), DynamoDB single-item writes p50 5 ms,
// p99 15 ms.
func Defaults() Config {
	return Config{
		Mode:        ModeInProc,
		Producers:   []int{4},
		Streams:     []int{16},
		RecordBytes: []int{1024},
		Classes:     []metastore.Class{metastore.Express},
		RatesMBps:   []float64{0},
		BatchBytes:  64 << 10,
		Inflight:    16,
		Duration:    10 * time.Second,
		Warmup:      time.Second,
		ExpressPut:  Latency{5 * time.Millisecond, 15 * time.Millisecond},
		StandardPut: Latency{40 * time.Millisecond, 150 * time.Millisecond},
		MetaWrite:   Latency{5 * time.Millisecond, 15 * time.Millisecond},
		ExpressK:    3,
		ExpressW:    2,
		ExpressGet:  GetModel{FirstByte: Latency{3 * time.Millisecond, 10 * time.Millisecond}, MBps: 90},
		StandardGet: GetModel{FirstByte: Latency{30 * time.Millisecond, 120 * time.Millisecond}, MBps: 90},

		Workloads:     []string{WorkWrite},
		Readers:       []int{1},
		FanoutReaders: []int{1, 10, 100},
		BacklogMB:     256,
		SettledPct:    50,
		TailRateMBps:  8,

		ExpressIdleCut:  star.Defaults().Express.IdleCut,
		StandardIdleCut: star.Defaults().Standard.IdleCut,
		Baseline:        true,
		Prices:          DefaultPrices(),
		Seed:            1,
		Sample:          100 * time.Millisecond,
	}
}

// Validate says what to fix.
func (c Config) Validate() error {
	switch c.Mode {
	case ModeInProc, ModeAPI:
	case ModeRemote:
		if c.Endpoint == "" {
			return fmt.Errorf("%w: remote mode needs an endpoint", ErrConfig)
		}
	default:
		return fmt.Errorf("%w: mode %q (want inproc, api or remote)", ErrConfig, c.Mode)
	}
	if len(c.Producers) == 0 || len(c.Streams) == 0 || len(c.RecordBytes) == 0 || len(c.Classes) == 0 || len(c.RatesMBps) == 0 {
		return fmt.Errorf("%w: every dimension needs at least one value", ErrConfig)
	}
	for _, v := range append(append([]int{}, c.Producers...), c.Streams...) {
		if v < 1 {
			return fmt.Errorf("%w: producers and streams must be positive", ErrConfig)
		}
	}
	for _, v := range c.RecordBytes {
		if v < 1 || v > 1<<20-64 {
			return fmt.Errorf("%w: record size %d bytes (1 to 1 MiB)", ErrConfig, v)
		}
	}
	for _, r := range c.RatesMBps {
		if r < 0 {
			return fmt.Errorf("%w: negative rate", ErrConfig)
		}
	}
	for _, d := range append(append([]time.Duration{}, c.ExpressFlush...), c.StandardFlush...) {
		if d < 0 {
			return fmt.Errorf("%w: negative flush deadline %s", ErrConfig, d)
		}
	}
	switch c.StreamOrder {
	case "", OrderSweep, OrderRandom:
	default:
		return fmt.Errorf("%w: stream order %q (want sweep or random)", ErrConfig, c.StreamOrder)
	}
	if c.BatchBytes < 1 || c.Inflight < 1 || c.Duration <= 0 || c.Warmup < 0 || c.Sample <= 0 {
		return fmt.Errorf("%w: batch bytes, inflight, duration and sample must be positive", ErrConfig)
	}
	if c.ExpressK < 1 || c.ExpressW < 1 || c.ExpressW > c.ExpressK {
		return fmt.Errorf("%w: Express K=%d W=%d", ErrConfig, c.ExpressK, c.ExpressW)
	}
	for _, w := range c.Workloads {
		switch w {
		case WorkWrite, WorkTail, WorkCatchup, WorkFanout:
		default:
			return fmt.Errorf("%w: workload %q (want write, tail, catchup or fanout)", ErrConfig, w)
		}
		if w != WorkWrite && c.Mode == ModeRemote {
			return fmt.Errorf("%w: the %s workload runs in-process or with --api, not against an endpoint", ErrConfig, w)
		}
	}
	if c.FlushBytes < 0 || c.FlushAge < 0 || c.Fanout < 0 {
		return fmt.Errorf("%w: flush bytes %d, flush age %s, fanout %d: want >= 0", ErrConfig, c.FlushBytes, c.FlushAge, c.Fanout)
	}
	if c.PassIndex && c.Mode == ModeRemote {
		return fmt.Errorf("%w: --pass-index configures the bench's own star (in-process or --api); a remote star has its own --pass-index", ErrConfig)
	}
	if len(c.Workloads) > 0 && !(len(c.Workloads) == 1 && c.Workloads[0] == WorkWrite) {
		for _, v := range c.RecordBytes {
			if v < 8 {
				return fmt.Errorf("%w: read workloads need records of at least 8 bytes (the send time is stamped in each body)", ErrConfig)
			}
		}
	}
	for _, v := range append(append([]int{}, c.Readers...), c.FanoutReaders...) {
		if v < 1 || v > 10000 {
			return fmt.Errorf("%w: readers %d (1 to 10000)", ErrConfig, v)
		}
	}
	if c.BacklogMB < 1 || c.SettledPct < 0 || c.SettledPct > 100 || c.TailRateMBps <= 0 {
		return fmt.Errorf("%w: backlog %d MB, settled %d%%, tail rate %g MB/s: want a positive backlog and rate, 0..100%%", ErrConfig, c.BacklogMB, c.SettledPct, c.TailRateMBps)
	}
	for _, g := range []GetModel{c.ExpressGet, c.StandardGet} {
		if g.MBps < 0 {
			return fmt.Errorf("%w: negative GET bandwidth %g MB/s", ErrConfig, g.MBps)
		}
	}
	for _, l := range []Latency{c.ExpressPut, c.StandardPut, c.MetaWrite, c.ExpressGet.FirstByte, c.StandardGet.FirstByte} {
		if l.P50 < 0 || l.P99 < l.P50 || (l.P50 == 0) != (l.P99 == 0) {
			return fmt.Errorf("%w: latency %s: want 0 <= p50 <= p99 (both zero for none)", ErrConfig, l)
		}
	}
	return nil
}

// flushes is the flush-deadline dimension of class cl's runs: {0} (the
// star's default) when none is given.
func (c Config) flushes(cl metastore.Class) []time.Duration {
	l := c.StandardFlush
	if cl == metastore.Express {
		l = c.ExpressFlush
	}
	if len(l) == 0 {
		return []time.Duration{0}
	}
	return l
}

// recordsPerBatch is how many records of size bytes make a batch.
func (c Config) recordsPerBatch(size int) int {
	n := c.BatchBytes / size
	return max(1, min(n, 1000, (1<<20)/(size+14)))
}
