package absorb

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// Config is the settlement Lambdas' configuration, read from the
// environment by the thin mains in functions/{absorb,settle,trim}:
//
//	STRAND_TABLE            DynamoDB table (required)
//	STRAND_STAR_IDS         comma-separated star ids (STRAND_STARS is read
//	                        when it is unset, as the CDK stack names it)
//	STRAND_STANDARD_BUCKET  the Standard chain's bucket (K=1, W=1)
//	STRAND_EXPRESS_BUCKETS  comma-separated Express directory buckets
//	STRAND_EXPRESS_W        Express copy quorum (default 2)
//	STRAND_SETTLED_BUCKET   the settled bucket (settle and trim)
//	STRAND_S3_PATH_STYLE    "1" or "true" for path-style S3 (emulators)
//	STRAND_PASS_INDEX       "true" (or "1", or unset: the default) or
//	                        "false" (or "0"): absorb passes are indexed in
//	                        the settled bucket (design 014; needs it), and
//	                        settle, trim and the probe read them; a chain
//	                        in refs mode switches at its next absorb pass.
//	                        "false" keeps refs mode and refuses a chain
//	                        once indexed (ErrIndexed).
//	STRAND_WINDOW_CACHE_MIB the pass index window cache's budget, MiB
//	                        (passindex.Window.MaxBytes; 0 or unset:
//	                        DefaultWindowCacheBytes). The star reads the
//	                        same variable (--window-cache-mib).
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
	PassIndex      bool
	// WindowCacheMiB is STRAND_WINDOW_CACHE_MIB (0: the default).
	WindowCacheMiB int64
}

// Window is the pass index window cache a settlement function reads
// through: the settled bucket's indexes, cached up to WindowCacheMiB.
func (c Config) Window(meta metastore.Store, settled objstore.Bucket, parallel int) *passindex.Window {
	return &passindex.Window{Meta: meta, Bucket: settled, Parallel: parallel, MaxBytes: c.WindowCacheMiB << 20}
}

// DefaultRetryFor bounds how long a Lambda's walk retries an unavailable
// bucket on one slot: well inside a Lambda timeout, so that the run fails
// and its message is redelivered rather than the function timing out.
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
		Table:          getenv("STRAND_TABLE"),
		Stars:          splitList(getenv("STRAND_STAR_IDS")),
		StandardBucket: strings.TrimSpace(getenv("STRAND_STANDARD_BUCKET")),
		ExpressBuckets: splitList(getenv("STRAND_EXPRESS_BUCKETS")),
		ExpressW:       2,
		SettledBucket:  strings.TrimSpace(getenv("STRAND_SETTLED_BUCKET")),
	}
	if len(c.Stars) == 0 {
		c.Stars = splitList(getenv("STRAND_STARS"))
	}
	if w := strings.TrimSpace(getenv("STRAND_EXPRESS_W")); w != "" {
		n, err := strconv.Atoi(w)
		if err != nil {
			return Config{}, fmt.Errorf("absorb: STRAND_EXPRESS_W=%q: %w", w, err)
		}
		c.ExpressW = n
	}
	switch strings.ToLower(strings.TrimSpace(getenv("STRAND_S3_PATH_STYLE"))) {
	case "", "0", "false":
	case "1", "true":
		c.PathStyle = true
	default:
		return Config{}, fmt.Errorf("absorb: STRAND_S3_PATH_STYLE=%q: want true or false", getenv("STRAND_S3_PATH_STYLE"))
	}
	if v := strings.TrimSpace(getenv("STRAND_WINDOW_CACHE_MIB")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<20 {
			return Config{}, fmt.Errorf("absorb: STRAND_WINDOW_CACHE_MIB=%q: want MiB from 0 to %d", v, 1<<20)
		}
		c.WindowCacheMiB = n
	}
	switch strings.ToLower(strings.TrimSpace(getenv("STRAND_PASS_INDEX"))) {
	case "0", "false":
	case "", "1", "true":
		c.PassIndex = true
	default:
		return Config{}, fmt.Errorf("absorb: STRAND_PASS_INDEX=%q: want true or false", getenv("STRAND_PASS_INDEX"))
	}
	switch {
	case c.PassIndex && c.SettledBucket == "":
		return Config{}, fmt.Errorf("absorb: the pass index (STRAND_PASS_INDEX, on unless \"false\") needs STRAND_SETTLED_BUCKET (the pass indexes live there)")
	case c.Table == "":
		return Config{}, fmt.Errorf("absorb: STRAND_TABLE is not set")
	case len(c.Stars) == 0:
		return Config{}, fmt.Errorf("absorb: STRAND_STAR_IDS (or STRAND_STARS) is not set")
	case c.StandardBucket == "" && len(c.ExpressBuckets) == 0:
		return Config{}, fmt.Errorf("absorb: neither STRAND_STANDARD_BUCKET nor STRAND_EXPRESS_BUCKETS is set")
	case len(c.ExpressBuckets) > 0 && (c.ExpressW < 1 || c.ExpressW > len(c.ExpressBuckets)):
		return Config{}, fmt.Errorf("absorb: STRAND_EXPRESS_W=%d with %d Express buckets", c.ExpressW, len(c.ExpressBuckets))
	}
	for _, s := range c.Stars {
		if err := metastore.ValidateChain(metastore.ChainID{Star: s, Class: metastore.Standard}); err != nil {
			return Config{}, fmt.Errorf("absorb: star %q: %w", s, err)
		}
	}
	return c, nil
}

// Chains are the configured chains: each star's Standard chain (when a
// Standard bucket is set) and Express chain (when Express buckets are).
func (c Config) Chains() []metastore.ChainID {
	var out []metastore.ChainID
	for _, s := range c.Stars {
		if c.StandardBucket != "" {
			out = append(out, metastore.ChainID{Star: s, Class: metastore.Standard})
		}
		if len(c.ExpressBuckets) > 0 {
			out = append(out, metastore.ChainID{Star: s, Class: metastore.Express})
		}
	}
	return out
}

// Sets builds the bucket sets, opening each bucket by name with open.
func (c Config) Sets(open func(name string) objstore.Bucket) Sets {
	var s Sets
	if c.StandardBucket != "" {
		s.Standard = chain.Set{Buckets: []objstore.Bucket{open(c.StandardBucket)}, W: 1, RetryFor: DefaultRetryFor}
	}
	if len(c.ExpressBuckets) > 0 {
		bs := make([]objstore.Bucket, len(c.ExpressBuckets))
		for i, n := range c.ExpressBuckets {
			bs[i] = open(n)
		}
		s.Express = chain.Set{Buckets: bs, W: c.ExpressW, RetryFor: DefaultRetryFor}
	}
	return s
}

// ChainSets builds the bucket set of every configured chain (Star filled
// in), for the functions that serve chains by id (the garbage probe).
func (c Config) ChainSets(open func(name string) objstore.Bucket) map[metastore.ChainID]chain.Set {
	sets := c.Sets(open)
	out := map[metastore.ChainID]chain.Set{}
	for _, id := range c.Chains() {
		if set, err := sets.For(id); err == nil {
			out[id] = set
		}
	}
	return out
}
