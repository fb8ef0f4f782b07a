package stack

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ExpressZones lists, per region, the availability-zone ids where S3
// Express One Zone directory buckets can be created, as the S3 User Guide
// ("S3 Express One Zone Availability Zones and Regions") lists them. AWS
// adds zones over time: a zone missing here is refused at synth unless
// strand:allowUnlistedExpressZones is true (then add it here).
var ExpressZones = map[string][]string{
	"us-east-1":      {"use1-az4", "use1-az5", "use1-az6"},
	"us-east-2":      {"use2-az1", "use2-az2"},
	"us-west-2":      {"usw2-az1", "usw2-az3", "usw2-az4"},
	"ap-south-1":     {"aps1-az1", "aps1-az3"},
	"ap-northeast-1": {"apne1-az1", "apne1-az4"},
	"eu-west-1":      {"euw1-az1", "euw1-az3"},
	"eu-north-1":     {"eun1-az1", "eun1-az2", "eun1-az3"},
}

// MinExpressK and MaxExpressK bound the Express set's size K. K=3 (W=2)
// commits a slot at two of three zones and keeps acking with one zone
// down; K=2 (W=2, in regions with only two Express zones) commits at both
// zones: the same two-zone durability for every ack, but any one zone's
// outage halts Express appends until it is back (docs/deploy.md, Regions).
const (
	MinExpressK = 2
	MaxExpressK = 3
)

// ExpressRegions returns the regions of ExpressZones with at least k
// zones, sorted.
func ExpressRegions(k int) []string {
	var out []string
	for r, zs := range ExpressZones {
		if len(zs) >= k {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

// validateExpressSet checks the Express set's size and that every zone id
// is an S3 Express zone of the region.
func (c *Config) validateExpressSet() error {
	k := len(c.ExpressAZs)
	if k < MinExpressK || k > MaxExpressK {
		return fmt.Errorf("%w: %s needs %d or %d AZ ids (three where the region has three Express zones), got %d",
			ErrConfig, CtxExpressAZs, MaxExpressK, MinExpressK, k)
	}
	for i, az := range c.ExpressAZs {
		if !azIDRe.MatchString(az) {
			return fmt.Errorf("%w: %s[%d]=%q is not an AZ id like use1-az4", ErrConfig, CtxExpressAZs, i, az)
		}
		if slices.Contains(c.ExpressAZs[:i], az) {
			return fmt.Errorf("%w: %s lists %q twice; the Express set needs distinct zones", ErrConfig, CtxExpressAZs, az)
		}
	}
	if c.AllowUnlistedExpressZones {
		return nil
	}
	zones, ok := ExpressZones[c.Region]
	if !ok {
		return fmt.Errorf("%w: %s=%s has no S3 Express One Zone zones that strand knows of; regions with three: %s; with two (K=2): %s "+
			"(or set %s=true if AWS has added zones since)", ErrConfig, CtxRegion, c.Region,
			strings.Join(ExpressRegions(3), ", "), strings.Join(twoZoneRegions(), ", "), CtxAllowUnlistedZones)
	}
	for i, az := range c.ExpressAZs {
		if !slices.Contains(zones, az) {
			return fmt.Errorf("%w: %s[%d]=%s is not an S3 Express One Zone zone of %s (%s) "+
				"(or set %s=true if AWS has added it since)", ErrConfig, CtxExpressAZs, i, az, c.Region,
				strings.Join(zones, ", "), CtxAllowUnlistedZones)
		}
	}
	if k < len(zones) && k < MaxExpressK {
		return fmt.Errorf("%w: %s has %d Express zones (%s) but %s lists %d: use %d, so one zone's outage does not halt Express appends",
			ErrConfig, c.Region, len(zones), strings.Join(zones, ", "), CtxExpressAZs, k, min(len(zones), MaxExpressK))
	}
	return nil
}

// twoZoneRegions are the regions with exactly two Express zones.
func twoZoneRegions() []string {
	var out []string
	for _, r := range ExpressRegions(2) {
		if len(ExpressZones[r]) == 2 {
			out = append(out, r)
		}
	}
	return out
}
