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
	// devExpressFlushDeadline: Express cuts at once when no flight is in
	// the air (its idle cut, on by default) and otherwise within this.
	devExpressFlushDeadline = 2 * time.Millisecond
	// devStandardFlushDeadline: Standard keeps a 10 ms deadline without
	// the idle cut. Cutting it as Express (idle cut, 2 ms) made
	// TestExactlyOnceThroughKill9 fail (a chunk appended twice in one of
	// three runs; see ADR 0047): --s3-idle-cut and --s3-flush-deadline
	// opt in.
	devStandardFlushDeadline = 10 * time.Millisecond
	// devFlightKiB: Express flights as large as Standard's. Every Express
	// put on dev is three copies on one disk, so the deployed 1 MiB
	// flights made Express the slow class.
	devFlightKiB = 8192
	// devBufferMiB: each class's pool, Standard's smaller than a deployed
	// star's (for a laptop), Express's larger (it holds 8 flights of
	// devFlightKiB, as Standard's does).
	devBufferMiB = 64
)

// devStarConfig is star.Defaults tuned for a local disk: Express cuts
// within devExpressFlushDeadline, Standard within
// devStandardFlushDeadline, and Express flights and pool are as large as
// Standard's.
func devStarConfig() star.Config {
	cfg := star.Defaults()
	for _, c := range []*star.ClassConfig{&cfg.Standard, &cfg.Express} {
		c.FlightKiB = devFlightKiB
		c.MemoryBufferMiB = devBufferMiB
	}
	cfg.Express.FlushDeadline = devExpressFlushDeadline
	cfg.Standard.FlushDeadline = devStandardFlushDeadline
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
