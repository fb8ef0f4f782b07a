package main

import (
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/shared/star"
)

// TestDevFlushSuitsALocalDisk: strand dev cuts both classes at once when
// nothing is in the air and otherwise within 10 ms, with Express flights and pool as large as
// Standard's, while the deployed star's defaults stay S3-suited; the
// flags override dev's values.
func TestDevFlushSuitsALocalDisk(t *testing.T) {
	dev, deployed := devStarConfig(), star.Defaults()
	if x := dev.Express; !x.IdleCut || x.FlushDeadline != 10*time.Millisecond {
		t.Errorf("dev Express: idle cut %v, flush deadline %v; want idle cut and 10 ms", x.IdleCut, x.FlushDeadline)
	}
	if s := dev.Standard; s.FlushDeadline != 10*time.Millisecond || !s.IdleCut {
		t.Errorf("dev Standard: idle cut %v, flush deadline %v; want idle cut and 10 ms (ADR 0069)", s.IdleCut, s.FlushDeadline)
	}
	if dev.Express.FlightKiB != dev.Standard.FlightKiB || dev.Express.MemoryBufferMiB != dev.Standard.MemoryBufferMiB {
		t.Errorf("dev Express flights %d KiB in a %d MiB pool, Standard %d KiB in %d MiB; want equal",
			dev.Express.FlightKiB, dev.Express.MemoryBufferMiB, dev.Standard.FlightKiB, dev.Standard.MemoryBufferMiB)
	}
	if deployed.Standard.FlushDeadline != 50*time.Millisecond || deployed.Standard.IdleCut ||
		deployed.Express.FlushDeadline != 4*time.Millisecond || deployed.Express.FlightKiB != 1024 {
		t.Errorf("deployed defaults changed: %+v / %+v", deployed.Standard, deployed.Express)
	}
	if dev.Express.W != deployed.Express.W || dev.Standard.CommitDeadline != deployed.Standard.CommitDeadline {
		t.Errorf("dev changed more than flushing: %+v", dev)
	}

	fl := pflag.NewFlagSet("dev", pflag.ContinueOnError)
	cfg := devStarConfig()
	bindDevFlushFlags(fl, &cfg)
	if err := fl.Parse([]string{"--s3-flush-deadline=7ms", "--s3-express-idle-cut=false", "--s3-idle-cut=false", "--s3-express-flight-kib=512"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Standard.FlushDeadline != 7*time.Millisecond || cfg.Express.IdleCut || cfg.Standard.IdleCut || cfg.Express.FlightKiB != 512 || cfg.Express.FlushDeadline != devFlushDeadline {
		t.Fatalf("flags not applied: %+v / %+v", cfg.Standard, cfg.Express)
	}
}
