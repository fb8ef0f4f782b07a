package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strings"

	"github.com/spf13/cobra"

	"github.com/strandlog/strand/shared/bench"
	"github.com/strandlog/strand/shared/metastore"
)

// newBench is `strand bench`: flags into a bench.Config, then bench.Run.
func newBench(cf *clientFlags) *cobra.Command {
	cfg := bench.Defaults()
	var classes []string
	var api, asJSON bool
	var jsonOut, cpuProfile, readProfile, traceOut string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure ack and end-to-end latency, write and read throughput, requests per GB, metastore ops and cost",
		Long: `Measure the star: producers x streams x record size x class (x rate x
flush deadline), each list a matrix dimension. By default an in-process star runs on memory buckets
behind a per-bucket S3 latency model (see docs/performance.md for the figures
the defaults are calibrated to), with the in-process absorb so metastore
traffic is real. --api runs a whole node on loopback and drives it through the
Go client; --endpoint (given explicitly) drives a running server instead.

--workload picks what runs: write (the default), tail (readers follow every
stream while producers append at --tail-rate: end-to-end latency next to ack
latency), catchup (readers from seq 0 over a --backlog-mb backlog, part
settled: MB/s, GETs and metastore reads per GB, read cost), fanout (tail and
catch-up of one stream by each of --fanout-readers readers). Reads run
in-process or with --api; GETs follow the --*-get-* models.`,
		Example: `  strand bench
  strand bench --class express,standard --rate 1,10,100 --duration 10s
  strand bench --rate 100 --s3-express-flush-deadline 2ms,4ms,8ms --baseline=false
  strand bench --api --class standard --producers 8 --json-out run.json --plot docs/perf
  strand bench --workload tail,catchup,fanout --backlog-mb 512
  strand bench --streams 1000,10000,100000 --record-size 100 --batch-bytes 100 --rate 2 --producers 16 --baseline=false --plot docs/perf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Classes = nil
			for _, c := range classes {
				cl, err := metastore.ParseClass(strings.TrimSpace(c))
				if err != nil {
					return err
				}
				cfg.Classes = append(cfg.Classes, cl)
			}
			switch {
			case cmd.Flags().Changed("endpoint"):
				tok, err := cf.bearer()
				if err != nil {
					return err
				}
				cfg.Mode, cfg.Endpoint, cfg.Token = bench.ModeRemote, cf.endpoint, tok
			case api:
				cfg.Mode = bench.ModeAPI
			}
			if !cmd.Flags().Changed("pass-index") {
				// On by default where the bench runs its own star; a remote
				// star has its own switch.
				cfg.PassIndex = cfg.Mode != bench.ModeRemote
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if readProfile != "" {
				f, err := os.Create(readProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if cpuProfile == "" { // one CPU profile at a time
					cfg.ReadWindow = (&window{cmd: cmd, flag: "--cpuprofile-read", start: func() error { return pprof.StartCPUProfile(f) }, stop: pprof.StopCPUProfile}).hook
				}
			}
			var traced *window
			if traceOut != "" {
				f, err := os.Create(traceOut)
				if err != nil {
					return err
				}
				defer f.Close()
				traced = &window{cmd: cmd, flag: "--trace", start: func() error { return trace.Start(f) }, stop: trace.Stop}
				cfg.WriteWindow = traced.hook
			}
			rs, err := bench.Run(cmd.Context(), cfg, cmd.ErrOrStderr())
			if traced != nil && !traced.started {
				fmt.Fprintf(cmd.ErrOrStderr(), "strand bench: --trace: no write window ran in this process (--endpoint and the read workloads have none); %s is empty\n", traceOut)
			}
			if jsonOut != "" && len(rs) > 0 {
				f, ferr := os.Create(jsonOut)
				if ferr != nil {
					return ferr
				}
				if werr := bench.WriteJSON(f, rs); werr != nil {
					f.Close()
					return werr
				}
				if cerr := f.Close(); cerr != nil {
					return cerr
				}
			}
			if asJSON {
				if werr := bench.WriteJSON(cmd.OutOrStdout(), rs); werr != nil {
					return werr
				}
			} else if werr := bench.WriteText(cmd.OutOrStdout(), rs); werr != nil {
				return werr
			}
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&api, "api", false, "run a node in-process and drive it through the API on loopback")
	f.IntSliceVar(&cfg.Producers, "producers", cfg.Producers, "producer goroutines (list)")
	f.BoolVar(&cfg.Idempotent, "idempotent", false, "in-process producers append exactly once (a producer id and batch seq per batch)")
	f.BoolVar(&cfg.PassIndex, "pass-index", true, "run the bench's star on the pass index (design 014; node.Config.NoPassIndex opts out): one index object per absorb pass, priced as S3 Standard PUTs, instead of one metastore ref per stream; in-process or --api (on by default there, off with --endpoint; --pass-index=false measures refs mode); the read workloads settle their backlog into runs and packs (no ref below --flush-bytes and --flush-age) and read it through the index window")
	f.DurationVar(&cfg.SettleEvery, "settle-every", 0, "with --pass-index in-process: run settle (runs, packs, flush) and trim on this period inside the measured window, counted (0: 1s; negative, e.g. -1s: keep settlement out of the window)")
	f.Int64Var(&cfg.FlushBytes, "flush-bytes", 0, "with --pass-index: settle's FlushBytes (0: 4 MiB)")
	f.DurationVar(&cfg.FlushAge, "flush-age", 0, "with --pass-index: settle's FlushAge, by record time (0: settle.DefaultFlushAge, 1h)")
	f.IntVar(&cfg.Fanout, "fanout", 0, "with --pass-index: settle's Fanout, level-1 runs merged into one (0: 60)")
	f.IntSliceVar(&cfg.Streams, "streams", cfg.Streams, "streams (list)")
	f.StringVar(&cfg.StreamOrder, "stream-order", "sweep", "how producers pick each batch's stream: sweep (in turn) or random (uniform)")
	f.IntSliceVar(&cfg.RecordBytes, "record-size", cfg.RecordBytes, "record body bytes (list)")
	f.StringSliceVar(&classes, "class", []string{"express"}, "classes: express, standard (list)")
	f.Float64SliceVar(&cfg.RatesMBps, "rate", cfg.RatesMBps, "offered MB/s (list; 0 = as fast as acks allow)")
	f.IntVar(&cfg.BatchBytes, "batch-bytes", cfg.BatchBytes, "target batch size (records per batch = this / record size, 1..1000)")
	f.IntVar(&cfg.Inflight, "inflight", cfg.Inflight, "batches outstanding per producer")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured window per run")
	f.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "warm-up before the window (excluded)")
	f.DurationVar(&cfg.ExpressPut.P50, "express-put-p50", cfg.ExpressPut.P50, "Express PUT latency model: median")
	f.DurationVar(&cfg.ExpressPut.P99, "express-put-p99", cfg.ExpressPut.P99, "Express PUT latency model: 0.99 quantile")
	f.DurationVar(&cfg.StandardPut.P50, "standard-put-p50", cfg.StandardPut.P50, "Standard PUT latency model: median")
	f.DurationVar(&cfg.StandardPut.P99, "standard-put-p99", cfg.StandardPut.P99, "Standard PUT latency model: 0.99 quantile")
	f.DurationVar(&cfg.MetaWrite.P50, "meta-write-p50", cfg.MetaWrite.P50, "baseline DynamoDB write latency model: median")
	f.DurationVar(&cfg.MetaWrite.P99, "meta-write-p99", cfg.MetaWrite.P99, "baseline DynamoDB write latency model: 0.99 quantile")
	f.StringSliceVar(&cfg.Workloads, "workload", cfg.Workloads, "workloads: write, tail, catchup, fanout (list)")
	f.IntSliceVar(&cfg.Readers, "readers", cfg.Readers, "tail and catch-up: readers per stream (list)")
	f.IntSliceVar(&cfg.FanoutReaders, "fanout-readers", cfg.FanoutReaders, "fan-out: readers of one stream (list)")
	f.IntVar(&cfg.BacklogMB, "backlog-mb", cfg.BacklogMB, "catch-up: backlog written before the read, MB across the streams")
	f.IntVar(&cfg.SettledPct, "settled-pct", cfg.SettledPct, "catch-up: percent of the backlog settled before the rest is written")
	f.Float64Var(&cfg.TailRateMBps, "tail-rate", cfg.TailRateMBps, "tail and fan-out: producers' offered MB/s")
	f.DurationVar(&cfg.ExpressGet.FirstByte.P50, "express-get-p50", cfg.ExpressGet.FirstByte.P50, "Express GET first-byte latency model: median")
	f.DurationVar(&cfg.ExpressGet.FirstByte.P99, "express-get-p99", cfg.ExpressGet.FirstByte.P99, "Express GET first-byte latency model: 0.99 quantile")
	f.Float64Var(&cfg.ExpressGet.MBps, "express-get-mbps", cfg.ExpressGet.MBps, "Express GET bandwidth per request, MB/s (0: unlimited)")
	f.DurationVar(&cfg.StandardGet.FirstByte.P50, "standard-get-p50", cfg.StandardGet.FirstByte.P50, "Standard GET first-byte latency model: median (also the settled bucket)")
	f.DurationVar(&cfg.StandardGet.FirstByte.P99, "standard-get-p99", cfg.StandardGet.FirstByte.P99, "Standard GET first-byte latency model: 0.99 quantile")
	f.Float64Var(&cfg.StandardGet.MBps, "standard-get-mbps", cfg.StandardGet.MBps, "Standard GET bandwidth per request, MB/s (0: unlimited)")
	f.IntVar(&cfg.ExpressK, "express-k", cfg.ExpressK, "Express buckets in the set (K)")
	f.IntVar(&cfg.ExpressW, "express-w", cfg.ExpressW, "Express copies that commit (W)")
	f.DurationSliceVar(&cfg.ExpressFlush, "s3-express-flush-deadline", nil, "Express flush deadlines (list; default: the star's)")
	f.DurationSliceVar(&cfg.StandardFlush, "s3-flush-deadline", nil, "Standard flush deadlines (list; default: the star's)")
	f.BoolVar(&cfg.ExpressIdleCut, "s3-express-idle-cut", cfg.ExpressIdleCut, "Express: cut at once when no flight is in the air")
	f.BoolVar(&cfg.StandardIdleCut, "s3-idle-cut", cfg.StandardIdleCut, "Standard: cut at once when no flight is in the air")
	f.IntVar(&cfg.ExpressFlightKiB, "s3-express-flight-kib", 0, "Express flight size in KiB (0: the star's default)")
	f.IntVar(&cfg.StandardKiB, "s3-flight-kib", 0, "Standard flight size in KiB (0: the star's default)")
	f.DurationVar(&cfg.ReleaseEventInterval, "release-event-interval", 0, "release events at most this often (0: the star's default)")
	f.BoolVar(&cfg.Baseline, "baseline", cfg.Baseline, "also measure the naive design (one PUT and one metastore write per append)")
	f.StringVar(&cfg.PlotDir, "plot", "", "write SVG plots (latency histogram, throughput over time) into this directory")
	f.BoolVar(&asJSON, "json", false, "print the results as JSON instead of text")
	f.StringVar(&jsonOut, "json-out", "", "also write the results as JSON to this file")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	f.StringVar(&traceOut, "trace", "", "write a Go execution trace of the first write window run in this process (in-process or --api) to this file (go tool trace): which goroutines held the processors while an ack waited")
	f.StringVar(&readProfile, "cpuprofile-read", "", "write a CPU profile of the catch-up read windows alone (the first, when there are several) to this file")
	f.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the latency draws, nonces and stream ids")
	p := &cfg.Prices
	f.Float64Var(&p.ExpressPutPer1000, "price-express-put", p.ExpressPutPer1000, "USD per 1000 S3 Express One Zone PUTs")
	f.Float64Var(&p.ExpressUploadPerGB, "price-express-upload-gb", p.ExpressUploadPerGB, "USD per GB uploaded to S3 Express One Zone")
	f.Int64Var(&p.ExpressUploadFreeB, "express-upload-free-bytes", p.ExpressUploadFreeB, "bytes of each Express request not charged for upload")
	f.Float64Var(&p.ExpressStorageGBMo, "price-express-storage", p.ExpressStorageGBMo, "USD per GB-month of S3 Express One Zone storage")
	f.Float64Var(&p.CrossAZPerGB, "price-cross-az-gb", p.CrossAZPerGB, "USD per GB sent to a bucket in another zone")
	f.Float64Var(&p.StandardPutPer1000, "price-standard-put", p.StandardPutPer1000, "USD per 1000 S3 Standard PUTs")
	f.Float64Var(&p.DynamoWRUPerM, "price-dynamo-wru", p.DynamoWRUPerM, "USD per million DynamoDB write request units")
	f.Float64Var(&p.DynamoRRUPerM, "price-dynamo-rru", p.DynamoRRUPerM, "USD per million DynamoDB read request units")
	f.Float64Var(&p.StandardGetPer1000, "price-standard-get", p.StandardGetPer1000, "USD per 1000 S3 Standard GETs")
	f.Float64Var(&p.ExpressGetPer1000, "price-express-get", p.ExpressGetPer1000, "USD per 1000 S3 Express One Zone GETs")
	f.Float64Var(&p.ExpressRetrPerGB, "price-express-retrieval-gb", p.ExpressRetrPerGB, "USD per GB retrieved from S3 Express One Zone")
	f.Float64Var(&p.LambdaPerM, "price-lambda", p.LambdaPerM, "USD per million Lambda invocations")
	f.Float64Var(&p.LambdaGBSecond, "price-lambda-gb-s", p.LambdaGBSecond, "USD per Lambda GB-second")
	f.Float64Var(&p.SQSFIFOPerM, "price-sqs-fifo", p.SQSFIFOPerM, "USD per million SQS FIFO requests")
	f.Float64Var(&p.SettledObjectMiB, "settled-object-mib", p.SettledObjectMiB, "modelled settled object size (settle PUTs per GB)")
	f.DurationVar(&p.TransitWindow, "transit-window", p.TransitWindow, "modelled life of a chain slot before trim (transit storage)")
	return cmd
}

// window profiles or traces the first of the bench's windows (one per
// file; its hook is a Config.ReadWindow or WriteWindow): start at its
// begin, stop at its end. A start that fails is said on stderr, not
// dropped (the file stays empty).
type window struct {
	cmd             *cobra.Command
	flag            string
	start           func() error
	stop            func()
	started, active bool
}

func (w *window) hook(begin bool) {
	switch {
	case begin && !w.started:
		w.started = true
		if err := w.start(); err != nil {
			fmt.Fprintf(w.cmd.ErrOrStderr(), "strand bench: %s: %v\n", w.flag, err)
			return
		}
		w.active = true
	case !begin && w.active:
		w.stop()
		w.active = false
	}
}
