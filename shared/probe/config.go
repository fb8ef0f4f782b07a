package probe

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// Config is the probe Lambda's configuration: the settlement Lambdas'
// environment (absorb.Config: STRAND_TABLE, STRAND_STAR_IDS,
// STRAND_STANDARD_BUCKET, STRAND_EXPRESS_BUCKETS, STRAND_EXPRESS_W,
// STRAND_SETTLED_BUCKET, STRAND_S3_PATH_STYLE) plus
//
//	STRAND_PROBE_SWEEP_EPOCHS epoch numbers a sweep looks back (default 8)
//	STRAND_PROBE_ORPHAN_GRACE how long a settled object stays a deletable
//	                          orphan before a sweep deletes it (a Go
//	                          duration, at least 1m; default 24h; "off":
//	                          report only)
type Config struct {
	absorb.Config
	SweepEpochs int
	OrphanGrace time.Duration // negative: report only
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	base, err := absorb.ConfigFromEnv(getenv)
	if err != nil {
		return Config{}, err
	}
	c := Config{Config: base, SweepEpochs: DefaultSweepEpochs, OrphanGrace: DefaultOrphanGrace}
	switch s := strings.TrimSpace(getenv("STRAND_PROBE_ORPHAN_GRACE")); s {
	case "":
	case "off":
		c.OrphanGrace = -1
	default:
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Minute {
			return Config{}, fmt.Errorf("probe: STRAND_PROBE_ORPHAN_GRACE=%q: want a duration of at least 1m, or off", s)
		}
		c.OrphanGrace = d
	}
	if s := strings.TrimSpace(getenv("STRAND_PROBE_SWEEP_EPOCHS")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return Config{}, fmt.Errorf("probe: STRAND_PROBE_SWEEP_EPOCHS=%q: want a whole number of at least 1", s)
		}
		c.SweepEpochs = n
	}
	return c, nil
}

// Sets builds the bucket set of every configured chain.
func (c Config) Sets(open func(name string) objstore.Bucket) map[metastore.ChainID]chain.Set {
	return c.ChainSets(open)
}
