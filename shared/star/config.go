package star

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metrics"
	"github.com/strandlog/strand/shared/objstore"
)

// ClassConfig configures one class's loglet.
type ClassConfig struct {
	// BucketNames is the bucket set (K = its length). Buckets are the opened
	// buckets, in the same order; the caller builds them from the names.
	BucketNames []string
	Buckets     []objstore.Bucket
	// W is the number of copies that commit a slot.
	W int
	// MemoryBufferMiB bounds the pool (admitted, uncut batches).
	MemoryBufferMiB int
	// ParallelUploads is the pipeline window: slots assigned and unreleased.
	ParallelUploads int
	// FlushDeadline: the pool's oldest byte waits at most this long before a cut.
	FlushDeadline time.Duration
	// IdleCut: when no flight of the loglet is in the air (every claimed
	// slot released), cut at once instead of waiting for the deadline. An
	// idle pipeline has no earlier slot to wait behind, so the deadline's
	// wait would be all latency; under load a flight is always in the air
	// and the deadline and size target decide alone. It adds at most one
	// flight per release of an otherwise empty pipeline (ADR 0038).
	IdleCut bool
	// FlightKiB is the target flight size, and its maximum but for one
	// oversized batch and one carried table (ADR 0062: a flight is at most
	// max(target, its first batch) plus 40,976 bytes).
	FlightKiB int
	// CommitDeadline: a flight that cannot reach W copies in this long halts
	// the epoch.
	CommitDeadline time.Duration
}

// Enabled reports whether the class has a bucket set.
func (c ClassConfig) Enabled() bool { return len(c.Buckets) > 0 }

// Config configures a star.
type Config struct {
	StarID         string
	Standard       ClassConfig
	Express        ClassConfig
	BacklogFlights int // released-but-unabsorbed flights, per loglet
	// BacklogMiB, if positive, also bounds the backlog (released-unabsorbed
	// plus in-flight flights) in bytes per loglet; 0 leaves the bound at
	// BacklogFlights x flight size.
	BacklogMiB int
	// ReleaseEventInterval: the waker hears of releases at most this often
	// (the latest head each time), which keeps absorb passes, and so the
	// metastore bill, independent of the ingest rate.
	ReleaseEventInterval time.Duration
	// HaltWait bounds how long producers wait on a halted epoch. Past it,
	// batches admitted before the halt fail with ErrOutcomeUnknown wrapping
	// ErrHalted and the halt's reason (recovery may still commit them), new
	// appends are refused with ErrHalted (nothing written), and Health
	// reports the star unhealthy. Recovery keeps trying; once it succeeds
	// the star serves again. 0 means the default, 30 s.
	HaltWait time.Duration
	// DedupeWindow, ProducerIdle and MaxProducers size each stream's
	// producer dedupe table (exactly-once appends): the latest batches
	// remembered per producer, how long an idle producer is remembered,
	// and how many producers (past it the least recently used is
	// forgotten). 0 means the defaults (DefaultDedupeWindow, ...).
	DedupeWindow int
	ProducerIdle time.Duration
	MaxProducers int
	// StarMaxProducers bounds the producers all streams' dedupe tables
	// remember together (--dedupe-max-producers): past it the star's least
	// recently used producer with no batch in flight is forgotten, in
	// whichever stream (dedupe.go, producerLRU). 0 means
	// DefaultStarMaxProducers.
	StarMaxProducers int
	// TenantFIFO turns tenant fairness off: one FIFO pool for every
	// tenant, whose budget any one may fill (the behaviour before issue
	// 18; benchmarks compare the two). See fair.go.
	TenantFIFO bool

	Clock   clock.Clock  // nil: the real clock
	Rand    io.Reader    // nonces; nil: crypto/rand
	Logger  *slog.Logger // nil: discard
	Metrics *metrics.Registry
	// Trace, if set, is told of every flight's cut, durability (W copies)
	// and release (see TraceEvent). nil costs nothing; benchmarks use it to
	// split ack latency into the wait for the cut, the quorum PUT and the
	// star's own overhead.
	Trace func(TraceEvent)
}

// Defaults returns the documented defaults (buckets left empty).
func Defaults() Config {
	return Config{
		StarID: "star-0",
		Standard: ClassConfig{
			W: 1, MemoryBufferMiB: 256, ParallelUploads: 16,
			FlushDeadline: 50 * time.Millisecond, FlightKiB: 8192, CommitDeadline: 10 * time.Second,
		},
		Express: ClassConfig{
			W: 2, MemoryBufferMiB: 32, ParallelUploads: 32,
			FlushDeadline: 4 * time.Millisecond, IdleCut: true, FlightKiB: 1024, CommitDeadline: 2 * time.Second,
		},
		BacklogFlights:       1024,
		ReleaseEventInterval: 200 * time.Millisecond,
		HaltWait:             30 * time.Second,
		StarMaxProducers:     DefaultStarMaxProducers,
	}
}

// BindFlags registers the star's flags on fs with c's values as defaults.
// Every flag can also be set by environment: --s3-parallel-uploads is
// STRAND_S3_PARALLEL_UPLOADS (see ApplyEnv).
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.StarID, "star-id", c.StarID, "this star's stable id (star-0, star-1, ...)")
	fs.IntVar(&c.Standard.MemoryBufferMiB, "s3-memory-buffer-mib", c.Standard.MemoryBufferMiB, "Standard pool budget in MiB: admission blocks at it")
	fs.IntVar(&c.Express.MemoryBufferMiB, "s3-express-memory-buffer-mib", c.Express.MemoryBufferMiB, "Express pool budget in MiB: admission blocks at it")
	fs.IntVar(&c.Standard.ParallelUploads, "s3-parallel-uploads", c.Standard.ParallelUploads, "Standard pipeline window: slots assigned but not yet released")
	fs.IntVar(&c.Express.ParallelUploads, "s3-express-parallel-uploads", c.Express.ParallelUploads, "Express pipeline window: slots assigned but not yet released")
	fs.IntVar(&c.BacklogFlights, "s3-chain-backlog-flights", c.BacklogFlights, "released-but-unabsorbed flights per loglet before publishes block")
	fs.IntVar(&c.BacklogMiB, "s3-chain-backlog-mib", c.BacklogMiB, "also bound the backlog in MiB per loglet (0: flights x flight size), e.g. to fit the task's memory")
	fs.DurationVar(&c.ReleaseEventInterval, "release-event-interval", c.ReleaseEventInterval, "publish the released head to the absorb at most this often")
	fs.BoolVar(&c.TenantFIFO, "tenant-fifo", c.TenantFIFO, "turn tenant fairness off: one FIFO pool per class that one token may fill (default: the pool budget and flights are shared fairly among tokens)")
	fs.IntVar(&c.StarMaxProducers, "dedupe-max-producers", c.StarMaxProducers, "idempotent producers the star remembers over all streams (exactly-once appends; about 750 bytes each): past it the least recently used one is forgotten, and a retry of one of its acknowledged batches would be written again (0: the default)")
	fs.DurationVar(&c.HaltWait, "halt-wait", c.HaltWait, "how long producers wait on a halted epoch before their appends fail with the halt's reason (and /healthz turns unhealthy)")
	c.BindFlushFlags(fs)
	fs.DurationVar(&c.Standard.CommitDeadline, "s3-commit-deadline", c.Standard.CommitDeadline, "Standard: a flight not at W copies by then halts the epoch")
	fs.DurationVar(&c.Express.CommitDeadline, "s3-express-commit-deadline", c.Express.CommitDeadline, "Express: a flight not at W copies by then halts the epoch")
	fs.IntVar(&c.Standard.W, "standard-w", c.Standard.W, "Standard: copies that commit a slot (W)")
	fs.IntVar(&c.Express.W, "express-w", c.Express.W, "Express: copies that commit a slot (W)")
	fs.Func("standard-bucket", "Standard chain bucket set, comma-separated (K = count; usually one bucket)", listFlag(&c.Standard.BucketNames))
	fs.Func("express-buckets", "Express chain bucket set: comma-separated directory buckets in different zones (K = count, usually 3)", listFlag(&c.Express.BucketNames))
}

// BindFlushFlags registers the flags of the cut policy (flush deadlines,
// idle cuts, flight sizes) on fs with c's values as defaults: part of
// BindFlags, and `strand dev`'s own (ADR 0047).
func (c *Config) BindFlushFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.Standard.FlushDeadline, "s3-flush-deadline", c.Standard.FlushDeadline, "Standard: longest wait of the pool's oldest byte before a cut")
	fs.DurationVar(&c.Express.FlushDeadline, "s3-express-flush-deadline", c.Express.FlushDeadline, "Express: longest wait of the pool's oldest byte before a cut")
	fs.BoolVar(&c.Standard.IdleCut, "s3-idle-cut", c.Standard.IdleCut, "Standard: cut at once when no flight is in the air instead of waiting for the deadline")
	fs.BoolVar(&c.Express.IdleCut, "s3-express-idle-cut", c.Express.IdleCut, "Express: cut at once when no flight is in the air instead of waiting for the deadline")
	fs.IntVar(&c.Standard.FlightKiB, "s3-flight-kib", c.Standard.FlightKiB, "Standard target flight size in KiB")
	fs.IntVar(&c.Express.FlightKiB, "s3-express-flight-kib", c.Express.FlightKiB, "Express target flight size in KiB")
}

func listFlag(dst *[]string) func(string) error {
	return func(s string) error {
		*dst = nil
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				*dst = append(*dst, p)
			}
		}
		return nil
	}
}

// ApplyEnv sets every flag of fs that was not given on the command line
// from its environment variable: STRAND_ + the flag name upper-cased with
// dashes as underscores. Call it after fs.Parse.
func ApplyEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		env := "STRAND_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", env, v, e)
			}
		}
	})
	return err
}

// Validate checks the configuration and says what to fix.
func (c Config) Validate() error {
	if c.StarID == "" || strings.ContainsAny(c.StarID, "/# \t") {
		return fmt.Errorf("star: star id %q must be non-empty without '/', '#' or spaces", c.StarID)
	}
	if !c.Standard.Enabled() && !c.Express.Enabled() {
		return fmt.Errorf("star: no bucket set: give --standard-bucket and/or --express-buckets")
	}
	if c.BacklogFlights < 1 {
		return fmt.Errorf("star: --s3-chain-backlog-flights must be at least 1, got %d", c.BacklogFlights)
	}
	if c.HaltWait < 0 {
		return fmt.Errorf("star: --halt-wait must be positive (0: the default 30s), got %s", c.HaltWait)
	}
	if c.StarMaxProducers < 0 {
		return fmt.Errorf("star: --dedupe-max-producers must be 0 (the default %d) or positive, got %d", DefaultStarMaxProducers, c.StarMaxProducers)
	}
	if c.BacklogMiB < 0 {
		return fmt.Errorf("star: --s3-chain-backlog-mib must be 0 (derived) or positive, got %d", c.BacklogMiB)
	}
	for _, cc := range []struct {
		name string
		c    ClassConfig
	}{{"standard", c.Standard}, {"express", c.Express}} {
		if !cc.c.Enabled() {
			continue
		}
		k := len(cc.c.Buckets)
		if len(cc.c.BucketNames) != 0 && len(cc.c.BucketNames) != k {
			return fmt.Errorf("star: %s: %d bucket names but %d buckets", cc.name, len(cc.c.BucketNames), k)
		}
		if cc.c.W < 1 || cc.c.W > k {
			return fmt.Errorf("star: %s: write quorum W=%d must be between 1 and K=%d", cc.name, cc.c.W, k)
		}
		if cc.c.MemoryBufferMiB < 1 || cc.c.ParallelUploads < 1 || cc.c.FlightKiB < 1 {
			return fmt.Errorf("star: %s: memory buffer (%d MiB), parallel uploads (%d) and flight size (%d KiB) must be positive",
				cc.name, cc.c.MemoryBufferMiB, cc.c.ParallelUploads, cc.c.FlightKiB)
		}
		if cc.c.ParallelUploads > MaxParallelUploads {
			return fmt.Errorf("star: %s: parallel uploads (%d) must be at most %d: a successor reads a stream's dedupe window back over at most that many flights in flight (RecoverStream, MaxRecoverRefs)",
				cc.name, cc.c.ParallelUploads, MaxParallelUploads)
		}
		if cc.c.FlushDeadline <= 0 || cc.c.CommitDeadline <= 0 {
			return fmt.Errorf("star: %s: flush and commit deadlines must be positive", cc.name)
		}
	}
	return nil
}

func (c Config) class(cl metastore.Class) ClassConfig {
	if cl == metastore.Express {
		return c.Express
	}
	return c.Standard
}

// itoa is strconv.Itoa, kept short for metric labels.
func itoa(i int) string { return strconv.Itoa(i) }
