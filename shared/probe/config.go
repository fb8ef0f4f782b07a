package probe

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// Config is the probe Lambda's configuration, read from the environment by
// functions/probe (the same names as the settlement Lambdas):
//
//	STRAND_TABLE              DynamoDB table (required)
//	STRAND_STAR_IDS           comma-separated star ids (STRAND_STARS when unset)
//	STRAND_STANDARD_BUCKET    the Standard chain's bucket (K=1, W=1)
//	STRAND_EXPRESS_BUCKETS    comma-separated Express directory buckets
//	STRAND_EXPRESS_W          Express copy quorum (default 2)
//	STRAND_SETTLED_BUCKET     the settled bucket (orphan report; optional)
//	STRAND_S3_PATH_STYLE      "1" or "true" for path-style S3 (emulators)
//	STRAND_PROBE_SWEEP_EPOCHS epoch numbers a sweep looks back (default 8)
//
// A class whose buckets are not configured has no chains.
type Config struct {
	Table          string
	Stars          []string
	StandardBucket string
	ExpressBuckets []string
	ExpressW       int
	SettledBucket  string
	PathStyle      bool
	SweepEpochs    int
}

// DefaultRetryFor bounds how long a probe retries an unavailable bucket,
// well inside a Lambda timeout.
const DefaultRetryFor = 15 * time.Second

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Table:          strings.TrimSpace(getenv("STRAND_TABLE")),
		Stars:          splitList(getenv("STRAND_STAR_IDS")),
		StandardBucket: strings.TrimSpace(getenv("STRAND_STANDARD_BUCKET")),
		ExpressBuckets: splitList(getenv("STRAND_EXPRESS_BUCKETS")),
		ExpressW:       2,
		SettledBucket:  strings.TrimSpace(getenv("STRAND_SETTLED_BUCKET")),
		SweepEpochs:    DefaultSweepEpochs,
	}
	if len(c.Stars) == 0 {
		c.Stars = splitList(getenv("STRAND_STARS"))
	}
	for _, v := range []struct {
		name string
		dst  *int
	}{{"STRAND_EXPRESS_W", &c.ExpressW}, {"STRAND_PROBE_SWEEP_EPOCHS", &c.SweepEpochs}} {
		if s := strings.TrimSpace(getenv(v.name)); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return Config{}, fmt.Errorf("probe: %s=%q: %w", v.name, s, err)
			}
			*v.dst = n
		}
	}
	switch s := strings.ToLower(strings.TrimSpace(getenv("STRAND_S3_PATH_STYLE"))); s {
	case "", "0", "false":
	case "1", "true":
		c.PathStyle = true
	default:
		return Config{}, fmt.Errorf("probe: STRAND_S3_PATH_STYLE=%q: want true or false", s)
	}
	switch {
	case c.Table == "":
		return Config{}, fmt.Errorf("probe: STRAND_TABLE is not set")
	case len(c.Stars) == 0:
		return Config{}, fmt.Errorf("probe: STRAND_STAR_IDS (or STRAND_STARS) is not set")
	case c.StandardBucket == "" && len(c.ExpressBuckets) == 0:
		return Config{}, fmt.Errorf("probe: neither STRAND_STANDARD_BUCKET nor STRAND_EXPRESS_BUCKETS is set")
	case len(c.ExpressBuckets) > 0 && (c.ExpressW < 1 || c.ExpressW > len(c.ExpressBuckets)):
		return Config{}, fmt.Errorf("probe: STRAND_EXPRESS_W=%d with %d Express buckets", c.ExpressW, len(c.ExpressBuckets))
	case c.SweepEpochs < 1:
		return Config{}, fmt.Errorf("probe: STRAND_PROBE_SWEEP_EPOCHS=%d: want at least 1", c.SweepEpochs)
	}
	for _, s := range c.Stars {
		if err := metastore.ValidateChain(metastore.ChainID{Star: s, Class: metastore.Standard}); err != nil {
			return Config{}, fmt.Errorf("probe: star %q: %w", s, err)
		}
	}
	return c, nil
}

// Sets builds the bucket set of every configured chain, opening each
// bucket by name with open (once per name).
func (c Config) Sets(open func(name string) objstore.Bucket) map[metastore.ChainID]chain.Set {
	opened := map[string]objstore.Bucket{}
	get := func(n string) objstore.Bucket {
		if b, ok := opened[n]; ok {
			return b
		}
		b := open(n)
		opened[n] = b
		return b
	}
	sets := map[metastore.ChainID]chain.Set{}
	for _, s := range c.Stars {
		if c.StandardBucket != "" {
			sets[metastore.ChainID{Star: s, Class: metastore.Standard}] = chain.Set{
				Star: s, Buckets: []objstore.Bucket{get(c.StandardBucket)}, W: 1, RetryFor: DefaultRetryFor}
		}
		if len(c.ExpressBuckets) > 0 {
			bs := make([]objstore.Bucket, len(c.ExpressBuckets))
			for i, n := range c.ExpressBuckets {
				bs[i] = get(n)
			}
			sets[metastore.ChainID{Star: s, Class: metastore.Express}] = chain.Set{
				Star: s, Buckets: bs, W: c.ExpressW, RetryFor: DefaultRetryFor}
		}
	}
	return sets
}
