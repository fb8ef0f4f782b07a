package stack

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Context keys read from cdk.json or `cdk synth -c key=value`. Every key has
// a default (DefaultConfig) so a bare `cdk synth` works.
const (
	CtxRegion                 = "strand:region"
	CtxAccount                = "strand:account"
	CtxExpressAZs             = "strand:expressAzs"
	CtxStarCount              = "strand:starCount"
	CtxMemoryBufferMiB        = "strand:memoryBufferMiB"
	CtxExpressMemoryBufferMiB = "strand:expressMemoryBufferMiB"
	CtxTaskCPU                = "strand:taskCpu"
	CtxTaskMemoryMiB          = "strand:taskMemoryMiB"
	CtxRetentionDays          = "strand:retentionDays"
	CtxDeletionProtection     = "strand:deletionProtection"
	CtxBucketPrefix           = "strand:bucketPrefix"
	CtxNatGateways            = "strand:natGateways"
	CtxPublicAPI              = "strand:publicApi"
	CtxAlarmEmail             = "strand:alarmEmail"
	CtxCertificateARN         = "strand:certificateArn"
	CtxAPIHostname            = "strand:apiHostname"
	CtxAllowPlaintextPublic   = "strand:allowPlaintextPublicApi"
	CtxExpressAZNames         = "strand:expressAzNames"
	CtxAllowUnlistedZones     = "strand:allowUnlistedExpressZones"
	CtxContainerInsights      = "strand:containerInsights"
	CtxNLBAccessLogs          = "strand:nlbAccessLogs"
	CtxS3AccessLogs           = "strand:s3AccessLogs"
	CtxFlowLogs               = "strand:flowLogs"
	CtxPassIndex              = "strand:passIndex"
	CtxWindowCacheMiB         = "strand:windowCacheMiB"
	CtxSettleMemoryMiB        = "strand:settleMemoryMiB"
	CtxDedupeMaxProducers     = "strand:dedupeMaxProducers"
	CtxStackName              = "strand:stackName"
	CtxStandby                = "strand:standby"
	CtxKafka                  = "strand:kafka"
)

// ContextKeys lists every key FromContext reads, in documentation order.
var ContextKeys = []string{
	CtxRegion, CtxAccount, CtxExpressAZs, CtxStarCount, CtxMemoryBufferMiB,
	CtxExpressMemoryBufferMiB, CtxTaskCPU, CtxTaskMemoryMiB, CtxRetentionDays,
	CtxDeletionProtection, CtxBucketPrefix, CtxNatGateways, CtxPublicAPI, CtxAlarmEmail,
	CtxCertificateARN, CtxAPIHostname, CtxAllowPlaintextPublic, CtxExpressAZNames,
	CtxAllowUnlistedZones, CtxContainerInsights, CtxNLBAccessLogs, CtxS3AccessLogs, CtxFlowLogs,
	CtxPassIndex, CtxWindowCacheMiB, CtxSettleMemoryMiB, CtxDedupeMaxProducers, CtxStackName,
	CtxStandby, CtxKafka,
}

// EnvDefaultAccount is the variable the CDK CLI sets to the account of its
// credentials. WithDefaultAccount reads it.
const EnvDefaultAccount = "CDK_DEFAULT_ACCOUNT"

// ErrConfig is returned (wrapped) for any invalid context value.
var ErrConfig = errors.New("infra: invalid config")

// Config is everything the stack is parameterised by.
type Config struct {
	// StackName is the CloudFormation stack's name (DefaultStackName):
	// a second deployment in one account takes another name and another
	// BucketPrefix.
	StackName string
	// Region the stack deploys to; the Express AZ ids must be in it.
	Region string
	// Account is optional; empty means "the CLI's current account".
	Account string
	// ExpressAZs are the availability-zone ids (e.g. use1-az4) of the
	// Express set, one directory bucket each: three (K=3), or two (K=2) in
	// a region with only two Express zones (regions.go).
	ExpressAZs []string
	// StarCount is the number of stars (star-0 .. star-N-1), one Fargate
	// service each.
	StarCount int
	// MemoryBufferMiB and ExpressMemoryBufferMiB are the star's pool budgets
	// (--s3-memory-buffer-mib, --s3-express-memory-buffer-mib).
	MemoryBufferMiB        int
	ExpressMemoryBufferMiB int
	// TaskCPU (units of 1/1024 vCPU) and TaskMemoryMiB size each star task.
	// TaskMemoryMiB 0 means "smallest valid size that fits the budgets, the
	// overhead, the agent sidecar and a minimal backlog" (starNeedMiB).
	TaskCPU       int
	TaskMemoryMiB int
	// RetentionDays is the CloudWatch Logs retention of every log group.
	RetentionDays int
	// DeletionProtection turns on DynamoDB deletion protection and retains
	// the table and buckets when the stack is deleted.
	DeletionProtection bool
	// BucketPrefix prefixes directory bucket names
	// (<prefix>-<account>--<azid>--x-s3).
	BucketPrefix string
	// NatGateways: 0 puts star tasks in public subnets with public IPs (no
	// NAT cost); >0 puts them in private subnets behind that many NATs.
	NatGateways int
	// PublicAPI makes the API load balancer internet-facing.
	PublicAPI bool
	// AlarmEmail, if set, subscribes an address to the alarm topic.
	AlarmEmail string
	// CertificateARN, if set, is an ACM certificate (in Region) the load
	// balancer terminates TLS with on every API listener; the tasks still
	// get plain TCP.
	CertificateARN string
	// APIHostname is the DNS name clients use for the API (a record the
	// user points at the load balancer). Required with CertificateARN,
	// which must cover it; STRAND_PEERS names it. Empty: the load
	// balancer's own DNS name.
	APIHostname string
	// AllowPlaintextPublicAPI accepts PublicAPI without CertificateARN,
	// that is bearer tokens in clear text on the internet.
	AllowPlaintextPublicAPI bool
	// ExpressAZNames are this account's availability-zone names of the
	// ExpressAZs, in the same order. When set (it needs Account), the VPC
	// spans exactly those zones and star-i runs in zone i mod K.
	ExpressAZNames []string
	// AllowUnlistedExpressZones accepts zone ids (and regions) that
	// ExpressZones does not list, for zones AWS added since.
	AllowUnlistedExpressZones bool
	// Observability, each on by default (docs/deploy.md, Observability):
	// ECS Container Insights on the cluster, the API load balancer's access
	// logs (TLS listeners only), S3 server access logs of the Standard
	// buckets, VPC flow logs. The logs go to one logs bucket (Storage.Logs)
	// that expires them after RetentionDays.
	ContainerInsights bool
	NLBAccessLogs     bool
	S3AccessLogs      bool
	FlowLogs          bool
	// PassIndex switches the pass index on (design 014): the absorb
	// indexes each pass in one object in the settled bucket instead of
	// one ref per stream. One switch for the whole stack: every star
	// (--pass-index) and every Lambda get the same STRAND_PASS_INDEX, and
	// the roles get the index/ and packs/ prefixes of the settled bucket.
	// On by default (strand:passIndex=false opts out): a chain that ran
	// in refs mode switches at its next absorb pass, live ("Switching a
	// live chain"); a chain once indexed refuses stages with it off.
	PassIndex bool
	// WindowCacheMiB is each star's pass index window cache
	// (--window-cache-mib, STRAND_WINDOW_CACHE_MIB): the decoded indexes
	// reads and tail recovery keep; the task's memory plan counts it with
	// PassIndex (WindowMiB). Default DefaultWindowCacheMiB (1536, above
	// the node's own 256 for `strand dev`): the window of about 135,000
	// active streams at the 24 h FlushAge, 144 B per entry of 83 live runs
	// (docs/operations.md, "Sizing the window cache"); past it a read that
	// reaches the window refetches run objects.
	WindowCacheMiB int
	// Standby runs each star as two tasks in two zones of the Express set,
	// a leader and a warm standby that contend for the star's lease in
	// the table (--standby, ADR 0051). On by default.
	Standby bool
	// DedupeMaxProducers is each star's --dedupe-max-producers
	// (STRAND_DEDUPE_MAX_PRODUCERS): the idempotent producers its dedupe
	// tables remember over all streams; the memory plan counts
	// DedupeMiB for them. Default star.DefaultStarMaxProducers (262,144).
	DedupeMaxProducers int
	// Kafka opens each star's Kafka front end (--kafka-addr, docs/kafka.md)
	// behind the load balancer: a bootstrap listener on KafkaPort and one
	// per star (KafkaListenerPort), TLS terminated there, SASL/PLAIN with
	// strand tokens. Needs CertificateARN (the password is a token); at
	// most MaxKafkaStars stars. Off by default.
	Kafka bool
	// SettleMemoryMiB is the settle Lambda's memory with PassIndex: a
	// step holds the live runs [flushed, settled) at once, about 205 B per
	// stream entry (BenchmarkStepPeakHeap), so at the 24 h FlushAge (83
	// live runs of every active stream) it needs about
	// 256 + 0.0162 x active streams MiB: the default 2048 holds 100,000
	// (docs/operations.md, "Sizing the window").
	SettleMemoryMiB int
}

// DedupeBytesPerProducer is what the memory plan counts per remembered
// producer: 752 bytes measured with a full window of 8 batches
// (BenchmarkDedupeStarBound, docs/performance/many-streams.md), rounded up.
const DedupeBytesPerProducer = 768

// DefaultWindowCacheMiB is the stack's default WindowCacheMiB.
const DefaultWindowCacheMiB = 1536

// DedupeMiB is what the star's memory plan counts for the dedupe tables
// at their star-wide bound: 192 MiB at the default.
func DedupeMiB(c Config) int {
	return (c.DedupeMaxProducers*DedupeBytesPerProducer + 1<<20 - 1) >> 20
}

// WindowMiB is what the star's memory plan counts for the pass index
// window cache: WindowCacheMiB with PassIndex, else nothing.
func WindowMiB(c Config) int {
	if !c.PassIndex {
		return 0
	}
	return c.WindowCacheMiB
}

// LogsBucket reports whether the stack needs the logs bucket.
func (c Config) LogsBucket() bool { return c.NLBAccessLogs || c.S3AccessLogs || c.FlowLogs }

// TLS reports whether the API listeners terminate TLS.
func (c Config) TLS() bool { return c.CertificateARN != "" }

// ZoneAligned reports whether star tasks are placed in Express zones.
func (c Config) ZoneAligned() bool { return len(c.ExpressAZNames) > 0 }

// StarZone returns the index into ExpressAZs (and ExpressAZNames) of the
// zone star i runs in when ZoneAligned: i mod K.
func (c Config) StarZone(i int) int { return i % len(c.ExpressAZs) }

// StandbyZone returns the index into ExpressAZs of the zone star i's
// standby task may run in with Standby: the Express zone after its own.
func (c Config) StandbyZone(i int) int { return (i + 1) % len(c.ExpressAZs) }

// StarTasks is how many tasks each star's service runs: 2 with Standby
// (a leader and a standby), else 1.
func (c Config) StarTasks() int {
	if c.Standby {
		return 2
	}
	return 1
}

// StarOverheadMiB is the star container's memory reserved beyond the two
// pool budgets and the backlogs (Go runtime and GC headroom, flights in
// upload, read buffers).
const StarOverheadMiB = 512

// AgentMemoryMiB is the CloudWatch agent sidecar's hard memory limit in
// each star task; the star container gets the rest of the task's memory.
const AgentMemoryMiB = 256

// MinBacklogMiB is the least byte budget BacklogMiB gives a loglet.
const MinBacklogMiB = 64

// StarContainerMiB is the star container's hard memory limit: the task's
// memory less the agent sidecar's.
func StarContainerMiB(c Config) int { return c.TaskMemoryMiB - AgentMemoryMiB }

// GoMemLimitMiB is the star's GOMEMLIMIT: 90% of its container's memory, so
// the Go collector works harder before the container limit is reached
// instead of the task being killed at it.
func GoMemLimitMiB(c Config) int { return StarContainerMiB(c) * 9 / 10 }

// BacklogMiB is the star's --s3-chain-backlog-mib: the star container's
// memory left after the pools and the overhead, split between the two
// loglets, so that an absorb outage fills the flight index up to the
// container's memory and not past it (at least MinBacklogMiB; Validate
// makes room for that minimum).
func BacklogMiB(c Config) int {
	return max(MinBacklogMiB, (StarContainerMiB(c)-c.MemoryBufferMiB-c.ExpressMemoryBufferMiB-StarOverheadMiB-WindowMiB(c)-DedupeMiB(c))/2)
}

// starNeedMiB is the least task memory: both pools, the overhead, the
// window cache (WindowMiB), the agent sidecar and a minimal backlog per
// loglet.
func starNeedMiB(c Config) int {
	return c.MemoryBufferMiB + c.ExpressMemoryBufferMiB + StarOverheadMiB + WindowMiB(c) + DedupeMiB(c) + AgentMemoryMiB + 2*MinBacklogMiB
}

// DefaultConfig is the configuration used for every key the context does
// not set. us-east-1 AZ ids use1-az4/5/6 host S3 Express One Zone.
func DefaultConfig() Config {
	return Config{
		StackName:              DefaultStackName,
		Region:                 "us-east-1",
		ExpressAZs:             []string{"use1-az4", "use1-az5", "use1-az6"},
		StarCount:              1,
		MemoryBufferMiB:        256,
		ExpressMemoryBufferMiB: 32,
		TaskCPU:                1024,
		RetentionDays:          30,
		DeletionProtection:     true,
		BucketPrefix:           "strand",
		NatGateways:            1,
		ContainerInsights:      true,
		NLBAccessLogs:          true,
		S3AccessLogs:           true,
		FlowLogs:               true,
		PassIndex:              true,
		WindowCacheMiB:         DefaultWindowCacheMiB,
		SettleMemoryMiB:        2048,
		DedupeMaxProducers:     262144,
		Standby:                true,
	}
}

// Lookup returns the raw context value for a key, or nil when unset. It is
// satisfied by a closure over constructs.Node.TryGetContext.
type Lookup func(key string) any

// FromContext builds a validated Config from context values over the
// defaults. Values may be native JSON types (from cdk.json) or strings (from
// `-c key=value`).
func FromContext(get Lookup) (Config, error) {
	c := DefaultConfig()
	var err error
	str := func(key string, dst *string) {
		if v := get(key); v != nil && err == nil {
			*dst = strings.TrimSpace(fmt.Sprint(v))
		}
	}
	num := func(key string, dst *int) {
		v := get(key)
		if v == nil || err != nil {
			return
		}
		switch x := v.(type) {
		case float64:
			if x != float64(int(x)) {
				err = fmt.Errorf("%w: %s=%v is not an integer", ErrConfig, key, v)
				return
			}
			*dst = int(x)
		case int:
			*dst = x
		default:
			n, perr := strconv.Atoi(strings.TrimSpace(fmt.Sprint(v)))
			if perr != nil {
				err = fmt.Errorf("%w: %s=%v is not an integer", ErrConfig, key, v)
				return
			}
			*dst = n
		}
	}
	boolean := func(key string, dst *bool) {
		v := get(key)
		if v == nil || err != nil {
			return
		}
		if b, ok := v.(bool); ok {
			*dst = b
			return
		}
		b, perr := strconv.ParseBool(strings.TrimSpace(fmt.Sprint(v)))
		if perr != nil {
			err = fmt.Errorf("%w: %s=%v is not a boolean", ErrConfig, key, v)
			return
		}
		*dst = b
	}
	list := func(key string, dst *[]string) {
		v := get(key)
		if v == nil {
			return
		}
		*dst = nil
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				*dst = append(*dst, strings.TrimSpace(fmt.Sprint(e)))
			}
		case []string:
			*dst = append(*dst, x...)
		default:
			// `-c key=a,b,c`, or a JSON list given as a string.
			s := strings.Trim(strings.TrimSpace(fmt.Sprint(v)), "[]")
			if strings.TrimSpace(s) == "" {
				return
			}
			for _, e := range strings.Split(s, ",") {
				*dst = append(*dst, strings.Trim(strings.TrimSpace(e), `"`))
			}
		}
	}
	str(CtxStackName, &c.StackName)
	str(CtxRegion, &c.Region)
	str(CtxAccount, &c.Account)
	list(CtxExpressAZs, &c.ExpressAZs)
	num(CtxStarCount, &c.StarCount)
	num(CtxMemoryBufferMiB, &c.MemoryBufferMiB)
	num(CtxExpressMemoryBufferMiB, &c.ExpressMemoryBufferMiB)
	num(CtxTaskCPU, &c.TaskCPU)
	num(CtxTaskMemoryMiB, &c.TaskMemoryMiB)
	num(CtxRetentionDays, &c.RetentionDays)
	boolean(CtxDeletionProtection, &c.DeletionProtection)
	str(CtxBucketPrefix, &c.BucketPrefix)
	num(CtxNatGateways, &c.NatGateways)
	boolean(CtxPublicAPI, &c.PublicAPI)
	str(CtxAlarmEmail, &c.AlarmEmail)
	str(CtxCertificateARN, &c.CertificateARN)
	str(CtxAPIHostname, &c.APIHostname)
	boolean(CtxAllowPlaintextPublic, &c.AllowPlaintextPublicAPI)
	list(CtxExpressAZNames, &c.ExpressAZNames)
	boolean(CtxAllowUnlistedZones, &c.AllowUnlistedExpressZones)
	boolean(CtxContainerInsights, &c.ContainerInsights)
	boolean(CtxNLBAccessLogs, &c.NLBAccessLogs)
	boolean(CtxS3AccessLogs, &c.S3AccessLogs)
	boolean(CtxFlowLogs, &c.FlowLogs)
	boolean(CtxPassIndex, &c.PassIndex)
	num(CtxWindowCacheMiB, &c.WindowCacheMiB)
	num(CtxSettleMemoryMiB, &c.SettleMemoryMiB)
	num(CtxDedupeMaxProducers, &c.DedupeMaxProducers)
	boolean(CtxStandby, &c.Standby)
	boolean(CtxKafka, &c.Kafka)
	if err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

var (
	azIDRe   = regexp.MustCompile(`^[a-z]{2,}[0-9]+-az[0-9]+$`)
	regionRe = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	prefixRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,19}$`)
	// acmRe captures the region of an ACM certificate ARN.
	acmRe     = regexp.MustCompile(`^arn:aws[a-z-]*:acm:([a-z0-9-]+):[0-9]{12}:certificate/[0-9a-f-]+$`)
	accountRe = regexp.MustCompile(`^[0-9]{12}$`)
	// stackRe: CloudFormation's stack name rule.
	stackRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,127}$`)
	hostRe  = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// WithDefaultAccount returns a Lookup that answers strand:account with
// getenv(CDK_DEFAULT_ACCOUNT) when the context does not set it and
// strand:expressAzNames is set: zone placement needs the account its AZ
// names belong to. Without the names the stack stays account-agnostic, as
// before (pinning an account changes the VPC's zones).
func WithDefaultAccount(get Lookup, getenv func(string) string) Lookup {
	return func(key string) any {
		v := get(key)
		if key != CtxAccount || v != nil || get(CtxExpressAZNames) == nil {
			return v
		}
		if a := strings.TrimSpace(getenv(EnvDefaultAccount)); a != "" {
			return a
		}
		return nil
	}
}

// DefaultStackName is the stack's name unless strand:stackName says
// otherwise.
const DefaultStackName = "Strand"

// LogRetentionDays are the values CloudWatch Logs accepts.
var LogRetentionDays = []int{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}

// Validate checks every field and fills TaskMemoryMiB when it is 0.
func (c *Config) Validate() error {
	if !stackRe.MatchString(c.StackName) {
		return fmt.Errorf("%w: %s=%q is not a CloudFormation stack name (a letter, then letters, digits and dashes, at most 128)", ErrConfig, CtxStackName, c.StackName)
	}
	if !regionRe.MatchString(c.Region) {
		return fmt.Errorf("%w: %s=%q is not a region name", ErrConfig, CtxRegion, c.Region)
	}
	if err := c.validateExpressSet(); err != nil {
		return err
	}
	if c.StarCount < 1 || c.StarCount > MaxStars {
		return fmt.Errorf("%w: %s=%d must be in 1..%d (one load balancer listener each)", ErrConfig, CtxStarCount, c.StarCount, MaxStars)
	}
	if c.MemoryBufferMiB < 1 {
		return fmt.Errorf("%w: %s=%d must be positive", ErrConfig, CtxMemoryBufferMiB, c.MemoryBufferMiB)
	}
	if c.ExpressMemoryBufferMiB < 1 {
		return fmt.Errorf("%w: %s=%d must be positive", ErrConfig, CtxExpressMemoryBufferMiB, c.ExpressMemoryBufferMiB)
	}
	if c.WindowCacheMiB < 1 {
		return fmt.Errorf("%w: %s=%d must be positive", ErrConfig, CtxWindowCacheMiB, c.WindowCacheMiB)
	}
	if c.DedupeMaxProducers < 1 {
		return fmt.Errorf("%w: %s=%d must be positive", ErrConfig, CtxDedupeMaxProducers, c.DedupeMaxProducers)
	}
	if c.SettleMemoryMiB < 128 || c.SettleMemoryMiB > 10240 {
		return fmt.Errorf("%w: %s=%d must be a Lambda memory size, 128..10240 MiB", ErrConfig, CtxSettleMemoryMiB, c.SettleMemoryMiB)
	}
	need := starNeedMiB(*c)
	if c.TaskMemoryMiB == 0 {
		m, err := SmallestFargateMemory(c.TaskCPU, need)
		if err != nil {
			return err
		}
		c.TaskMemoryMiB = m
	}
	if !ValidFargateSize(c.TaskCPU, c.TaskMemoryMiB) {
		return fmt.Errorf("%w: %s=%d with %s=%d is not a Fargate task size", ErrConfig, CtxTaskCPU, c.TaskCPU, CtxTaskMemoryMiB, c.TaskMemoryMiB)
	}
	if c.TaskMemoryMiB < need {
		return fmt.Errorf("%w: %s=%d MiB cannot hold the pool budgets %d+%d MiB plus %d MiB overhead, the %d MiB pass index window cache (%s), the %d MiB dedupe tables (%s), the %d MiB agent sidecar and 2x%d MiB backlog",
			ErrConfig, CtxTaskMemoryMiB, c.TaskMemoryMiB, c.MemoryBufferMiB, c.ExpressMemoryBufferMiB, StarOverheadMiB, WindowMiB(*c), CtxWindowCacheMiB, DedupeMiB(*c), CtxDedupeMaxProducers, AgentMemoryMiB, MinBacklogMiB)
	}
	if !slices.Contains(LogRetentionDays, c.RetentionDays) {
		return fmt.Errorf("%w: %s=%d is not a CloudWatch Logs retention (%v)", ErrConfig, CtxRetentionDays, c.RetentionDays, LogRetentionDays)
	}
	if !prefixRe.MatchString(c.BucketPrefix) {
		return fmt.Errorf("%w: %s=%q must be 1-20 of [a-z0-9-], starting alphanumeric", ErrConfig, CtxBucketPrefix, c.BucketPrefix)
	}
	if c.NatGateways < 0 || c.NatGateways > 3 {
		return fmt.Errorf("%w: %s=%d must be in 0..3", ErrConfig, CtxNatGateways, c.NatGateways)
	}
	if c.AlarmEmail != "" && !strings.Contains(c.AlarmEmail, "@") {
		return fmt.Errorf("%w: %s=%q is not an e-mail address", ErrConfig, CtxAlarmEmail, c.AlarmEmail)
	}
	if c.Account != "" && !accountRe.MatchString(c.Account) {
		return fmt.Errorf("%w: %s=%q is not a 12-digit account id", ErrConfig, CtxAccount, c.Account)
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	if err := c.validateKafka(); err != nil {
		return err
	}
	return c.validateZones()
}

// validateTLS checks the certificate, the host name and the refusal to
// serve a public API in clear text.
func (c *Config) validateTLS() error {
	if c.CertificateARN != "" {
		m := acmRe.FindStringSubmatch(c.CertificateARN)
		if m == nil {
			return fmt.Errorf("%w: %s=%q is not an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)", ErrConfig, CtxCertificateARN, c.CertificateARN)
		}
		if m[1] != c.Region {
			return fmt.Errorf("%w: %s is in %s; a load balancer in %s needs a certificate from ACM in %s", ErrConfig, CtxCertificateARN, m[1], c.Region, c.Region)
		}
		if c.APIHostname == "" {
			return fmt.Errorf("%w: %s needs %s: the DNS name clients use, which the certificate covers and which you point at the load balancer (the load balancer's own name is not on the certificate)",
				ErrConfig, CtxCertificateARN, CtxAPIHostname)
		}
	}
	if c.APIHostname != "" && !hostRe.MatchString(c.APIHostname) {
		return fmt.Errorf("%w: %s=%q is not a DNS name (lower case, like api.example.com)", ErrConfig, CtxAPIHostname, c.APIHostname)
	}
	if c.PublicAPI && c.CertificateARN == "" && !c.AllowPlaintextPublicAPI {
		return fmt.Errorf("%w: %s=true without %s would send bearer tokens over the internet in clear text; "+
			"set %s (an ACM certificate) and %s, or, to accept clear text, %s=true",
			ErrConfig, CtxPublicAPI, CtxCertificateARN, CtxCertificateARN, CtxAPIHostname, CtxAllowPlaintextPublic)
	}
	return nil
}

// validateKafka refuses a Kafka front end that would take SASL/PLAIN
// passwords (strand tokens) in clear text, or more listeners than a
// Network Load Balancer has.
func (c *Config) validateKafka() error {
	if !c.Kafka {
		return nil
	}
	if c.CertificateARN == "" {
		return fmt.Errorf("%w: %s=true needs %s and %s: Kafka clients send a strand token as their SASL/PLAIN password, "+
			"which only TLS may carry (the load balancer terminates it, as for the API)", ErrConfig, CtxKafka, CtxCertificateARN, CtxAPIHostname)
	}
	if c.StarCount > MaxKafkaStars {
		return fmt.Errorf("%w: %s=true allows at most %d stars (%s=%d): two listeners per star and two shared ones within a load balancer's 50",
			ErrConfig, CtxKafka, MaxKafkaStars, CtxStarCount, c.StarCount)
	}
	return nil
}

// validateZones checks the AZ names of the Express set.
func (c *Config) validateZones() error {
	if len(c.ExpressAZNames) == 0 {
		return nil
	}
	if len(c.ExpressAZNames) != len(c.ExpressAZs) {
		return fmt.Errorf("%w: %s needs one AZ name per id of %s (%d), got %d", ErrConfig, CtxExpressAZNames, CtxExpressAZs, len(c.ExpressAZs), len(c.ExpressAZNames))
	}
	nameRe := regexp.MustCompile(`^` + regexp.QuoteMeta(c.Region) + `[a-z]$`)
	for i, n := range c.ExpressAZNames {
		if !nameRe.MatchString(n) {
			return fmt.Errorf("%w: %s[%d]=%q is not an AZ name of %s (like %sa); "+
				"`aws ec2 describe-availability-zones --region %s --query 'AvailabilityZones[].[ZoneId,ZoneName]' --output text` prints this account's mapping",
				ErrConfig, CtxExpressAZNames, i, n, c.Region, c.Region, c.Region)
		}
		if slices.Contains(c.ExpressAZNames[:i], n) {
			return fmt.Errorf("%w: %s lists %q twice", ErrConfig, CtxExpressAZNames, n)
		}
	}
	if c.Account == "" {
		return fmt.Errorf("%w: %s needs the account its names belong to (AZ names map to different zones in different accounts): "+
			"set %s, or run the CDK CLI with credentials (it sets %s)", ErrConfig, CtxExpressAZNames, CtxAccount, EnvDefaultAccount)
	}
	return nil
}

// fargateMemory returns the memory sizes (MiB) Fargate allows for a CPU
// value (Linux tasks), or nil for an unsupported CPU value.
func fargateMemory(cpu int) []int {
	span := func(lo, hi, step int) []int {
		var out []int
		for m := lo; m <= hi; m += step {
			out = append(out, m)
		}
		return out
	}
	// The AWS Fargate task size table: 1 GiB steps up to 4 vCPU, 4 GiB
	// steps at 8 vCPU, 8 GiB steps at 16 vCPU.
	switch cpu {
	case 256:
		return []int{512, 1024, 2048}
	case 512:
		return span(1024, 4096, 1024)
	case 1024:
		return span(2048, 8192, 1024)
	case 2048:
		return span(4096, 16384, 1024)
	case 4096:
		return span(8192, 30720, 1024)
	case 8192:
		return span(16384, 61440, 4096)
	case 16384:
		return span(32768, 122880, 8192)
	}
	return nil
}

// ValidFargateSize reports whether cpu/memory is a Fargate task size.
func ValidFargateSize(cpu, memMiB int) bool {
	return slices.Contains(fargateMemory(cpu), memMiB)
}

// SmallestFargateMemory returns the smallest valid memory for cpu that is
// at least need MiB.
func SmallestFargateMemory(cpu, need int) (int, error) {
	sizes := fargateMemory(cpu)
	if sizes == nil {
		return 0, fmt.Errorf("%w: %s=%d is not a Fargate CPU value (256, 512, 1024, 2048, 4096, 8192, 16384)", ErrConfig, CtxTaskCPU, cpu)
	}
	for _, m := range sizes {
		if m >= need {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: %d MiB does not fit a task with %s=%d (max %d MiB); raise the CPU", ErrConfig, need, CtxTaskCPU, cpu, sizes[len(sizes)-1])
}

// StarID returns the stable id of star i.
func StarID(i int) string { return fmt.Sprintf("star-%d", i) }

// APIPort and AdminPort are the star's listening ports (see DESIGN.md).
const (
	APIPort   = 4780
	AdminPort = 9090
)

// ExpressW is the Express set's write quorum: a slot commits at 2 of its 3
// copies (K=3), or at both with K=2. The star (STRAND_EXPRESS_W) and every
// Lambda get it.
const ExpressW = 2

// StarListenerPort is the load balancer port that reaches only star i; the
// shared APIPort listener reaches any star.
func StarListenerPort(i int) int { return APIPort + 1 + i }

// KafkaPort is the star's Kafka listening port and the load balancer's
// bootstrap listener (any star) with Config.Kafka.
const KafkaPort = 9092

// KafkaListenerPort is the load balancer port that reaches only star i's
// Kafka front end: what the star advertises (STRAND_KAFKA_ADVERTISE), so
// Metadata names brokers a client can reach.
func KafkaListenerPort(i int) int { return KafkaPort + 1 + i }

// MaxKafkaStars keeps an API and a Kafka listener per star plus the two
// shared ones within a Network Load Balancer's 50 listeners.
const MaxKafkaStars = 24

// MaxStars keeps one listener per star plus the shared one within a
// Network Load Balancer's 50 listeners.
const MaxStars = 48
