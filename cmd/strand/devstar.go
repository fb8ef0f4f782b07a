package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/shared/star"
)

// Flush settings of `strand dev` (ADR 0047). The deployed star's defaults
// (star.Defaults: Standard cuts at 50 ms, Express at 4 ms) spend latency
// to save S3 request prices; a local disk charges none, and its put is an
// fsync of a millisecond or two, so dev cuts whenever nothing is in the
// air and waits at most devFlushDeadline for company otherwise.
const (
	devFlushDeadline = 2 * time.Millisecond
	// devFlightKiB: Express flights as large as Standard's. Every Express
	// put on dev is three copies on one disk, each a new file and two
	// fsyncs, so the deployed 1 MiB flights made Express the slow class.
	devFlightKiB = 8192
	// devBufferMiB: each class's pool, Standard's smaller than a deployed
	// star's (for a laptop), Express's larger (it holds 8 flights of
	// devFlightKiB, as Standard's does).
	devBufferMiB = 64
)

// devStarConfig is star.Defaults tuned for a local disk: both classes cut
// at once when no flight is in the air (IdleCut) and otherwise within
// devFlushDeadline; Express flights and pool are as large as Standard's.
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

// bindDevFlushFlags registers the flush flags of `strand dev` on fl, with
// cfg's values as defaults (the same names as the deployed star's).
func bindDevFlushFlags(fl *pflag.FlagSet, cfg *star.Config) {
	fl.DurationVar(&cfg.Standard.FlushDeadline, "s3-flush-deadline", cfg.Standard.FlushDeadline, "Standard: longest wait of the pool's oldest byte before a cut (dev: suited to a local disk)")
	fl.DurationVar(&cfg.Express.FlushDeadline, "s3-express-flush-deadline", cfg.Express.FlushDeadline, "Express: longest wait of the pool's oldest byte before a cut (dev: suited to a local disk)")
	fl.BoolVar(&cfg.Standard.IdleCut, "s3-idle-cut", cfg.Standard.IdleCut, "Standard: cut at once when no flight is in the air")
	fl.BoolVar(&cfg.Express.IdleCut, "s3-express-idle-cut", cfg.Express.IdleCut, "Express: cut at once when no flight is in the air")
	fl.IntVar(&cfg.Standard.FlightKiB, "s3-flight-kib", cfg.Standard.FlightKiB, "Standard target flight size in KiB")
	fl.IntVar(&cfg.Express.FlightKiB, "s3-express-flight-kib", cfg.Express.FlightKiB, "Express target flight size in KiB")
}
