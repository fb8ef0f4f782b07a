package probe

import (
	"fmt"
	"strconv"
	"strings"

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
type Config struct {
	absorb.Config
	SweepEpochs int
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	base, err := absorb.ConfigFromEnv(getenv)
	if err != nil {
		return Config{}, err
	}
	c := Config{Config: base, SweepEpochs: DefaultSweepEpochs}
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
