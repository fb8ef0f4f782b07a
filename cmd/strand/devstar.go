package main

import (
	"flag"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/shared/star"
)

// Flush settings of `strand dev` (ADR 0047). The deployed star's defaults
// (star.Defaults: Standard cuts at 50 ms, Express at 4 ms in 1 MiB
// flights) spend latency to save S3 request prices; a local disk charges
// none, and its put is an fsync or two.
const (
	// devFlushDeadline: both classes cut within 10 ms, and at once when
	// no flight of theirs is in the air (the idle cut), so at a low rate
	// an ack is a put's latency; under load the deadline gathers more
	// batches per fsync (with 2 ms, Express wrote half as fast through
	// one append session: ADR 0047). Standard's idle cut is on since
	// ADR 0069 (TestKafkaThroughKill9 paces its kill by its producer).
	devFlushDeadline = 10 * time.Millisecond
	// devFlightKiB: Express flights as large as Standard's. Every Express
	// put on dev is three copies on one disk, so the deployed 1 MiB
	// flights made Express the slow class.
	devFlightKiB = 8192
	// devBufferMiB: each class's pool, Standard's smaller than a deployed
	// star's (for a laptop), Express's larger (it holds 8 flights of
	// devFlightKiB, as Standard's does).
	devBufferMiB = 64
)

// devStarConfig is star.Defaults tuned for a local disk: both classes cut
// within devFlushDeadline and at once when idle, and Express flights and
// pool are as large as Standard's.
func devStarConfig() star.Config {
	cfg := star.Defaults()
	for _, c := range []*star.ClassConfig{&cfg.Standard, &cfg.Express} {
		c.FlushDeadline = devFlushDeadline
		c.IdleCut = true
		c.FlightKiB = devFlightKiB
		c.MemoryBufferMiB = devBufferMiB
	}
	return cfg
}

// bindDevFlushFlags registers the flush flags of `strand dev` on fl (the
// deployed star's, star.Config.BindFlushFlags), with cfg's values as
// defaults.
func bindDevFlushFlags(fl *pflag.FlagSet, cfg *star.Config) {
	fs := flag.NewFlagSet("flush", flag.ContinueOnError)
	cfg.BindFlushFlags(fs)
	fl.AddGoFlagSet(fs)
}
