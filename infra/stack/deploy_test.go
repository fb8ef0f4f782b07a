package stack

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/strandlog/strand/infra/bundle"
)

// Assertions for what would fail or hurt on a first deploy to a real
// account (issue 15); each fails if its fix is undone.

// TestBucketsRetainExceptOnCreate: with deletion protection, the buckets
// (the directory buckets have fixed names) are retained on delete and on
// replacement but deleted when the stack's first create rolls back;
// without it they are deleted.
func TestBucketsRetainExceptOnCreate(t *testing.T) {
	for _, c := range []struct {
		s              *synthesized
		delete, update string
	}{
		{defaults(t), "RetainExceptOnCreate", "Retain"},
		{threeStars(t), "Delete", "Delete"},
	} {
		for _, typ := range []string{"AWS::S3Express::DirectoryBucket", "AWS::S3::Bucket"} {
			bs := c.s.ofType(typ)
			if len(bs) == 0 {
				t.Fatalf("no %s", typ)
			}
			for id, r := range bs {
				if r["DeletionPolicy"] != c.delete || r["UpdateReplacePolicy"] != c.update {
					t.Errorf("deletionProtection=%v: %s: DeletionPolicy %v UpdateReplacePolicy %v, want %s and %s",
						c.s.cfg.DeletionProtection, id, r["DeletionPolicy"], r["UpdateReplacePolicy"], c.delete, c.update)
				}
			}
		}
	}
}

// TestAlarmTopicAllowsCloudWatch: the alarm topic's policy (which replaces
// SNS's default policy) lets CloudWatch alarms of this account publish, and
// every alarm notifies that topic.
func TestAlarmTopicAllowsCloudWatch(t *testing.T) {
	s := defaults(t)
	topics := s.ofType("AWS::SNS::Topic")
	if len(topics) != 1 {
		t.Fatalf("%d topics, want 1", len(topics))
	}
	var topic string
	for id := range topics {
		topic = id
	}
	ref := js(map[string]any{"Ref": topic})
	policies := s.ofType("AWS::SNS::TopicPolicy")
	allowed := false
	for id, r := range policies {
		p := props(r)
		if !strings.Contains(js(p["Topics"]), ref) {
			continue
		}
		for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			m := st.(map[string]any)
			if m["Effect"] != "Allow" || js(m["Principal"]) != `{"Service":"cloudwatch.amazonaws.com"}` {
				continue
			}
			if !strings.Contains(js(m["Action"]), "sns:Publish") || js(m["Resource"]) != ref {
				t.Errorf("%s: CloudWatch statement %s does not allow sns:Publish on the topic", id, js(m))
				continue
			}
			cond := js(m["Condition"])
			if !strings.Contains(cond, `"StringEquals":{"aws:SourceAccount":{"Ref":"AWS::AccountId"}}`) {
				t.Errorf("%s: CloudWatch may publish without aws:SourceAccount = this account: %s", id, cond)
				continue
			}
			allowed = true
		}
	}
	if !allowed {
		t.Errorf("no topic policy of %s allows cloudwatch.amazonaws.com to publish: alarms would notify nobody (policies %s)", topic, js(policies))
	}
	alarms := s.ofType("AWS::CloudWatch::Alarm")
	for id, r := range alarms {
		if acts := js(props(r)["AlarmActions"]); acts != "["+ref+"]" {
			t.Errorf("alarm %s: actions %s, want the alarm topic", id, acts)
		}
	}
}

// TestQueueRetention: every queue keeps messages 14 days, as long as the
// dead-letter queues.
func TestQueueRetention(t *testing.T) {
	s := defaults(t)
	qs := s.ofType("AWS::SQS::Queue")
	if len(qs) != 4 {
		t.Fatalf("%d queues, want 4", len(qs))
	}
	for id, r := range qs {
		if got := props(r)["MessageRetentionPeriod"]; got != float64(14*24*3600) {
			t.Errorf("%s: MessageRetentionPeriod %v, want %d (14 days)", id, got, 14*24*3600)
		}
	}
}

// TestLambdaAssetsAreArm64Bootstraps: the Code of every function is an
// asset holding exactly one file, bootstrap, an aarch64 ELF executable
// (no placeholder, no amd64 binary).
func TestLambdaAssetsAreArm64Bootstraps(t *testing.T) {
	s := defaults(t)
	raw, err := os.ReadFile(filepath.Join(s.outdir, "Strand.assets.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		Files map[string]struct {
			Source struct{ Path, Packaging string }
		}
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	fns := s.ofType("AWS::Lambda::Function")
	if len(fns) != len(FunctionNames) {
		t.Fatalf("%d functions, want %d", len(fns), len(FunctionNames))
	}
	for id, r := range fns {
		key, _ := props(r)["Code"].(map[string]any)["S3Key"].(string)
		hash, ok := strings.CutSuffix(key, ".zip")
		asset, found := manifest.Files[hash]
		if !ok || !found {
			t.Errorf("%s: Code S3Key %q is not a file asset of the stack", id, key)
			continue
		}
		if asset.Source.Packaging != "zip" {
			t.Errorf("%s: asset packaging %q, want zip", id, asset.Source.Packaging)
		}
		dir := filepath.Join(s.outdir, asset.Source.Path)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		if len(ents) != 1 || ents[0].Name() != "bootstrap" {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("%s: asset holds %v, want exactly [bootstrap]", id, names)
			continue
		}
		if err := bundle.CheckELF(filepath.Join(dir, "bootstrap")); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}

// starStages parses the star's Dockerfile.
func starStages(t *testing.T) []bundle.Stage {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, StarDockerfile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stages, err := bundle.ParseDockerfile(f)
	if err != nil {
		t.Fatal(err)
	}
	return stages
}

// TestDockerfilePlatformArgs: the build stages of the star's Dockerfile
// declare BuildKit's automatic platform arguments without defaults (a
// default would pin the binary's architecture whatever --platform says).
func TestDockerfilePlatformArgs(t *testing.T) {
	stages := starStages(t)
	declared := map[string]bool{}
	for _, st := range stages[:len(stages)-1] {
		for _, in := range st.Instrs {
			if in.Cmd != "ARG" {
				continue
			}
			for _, a := range strings.Fields(in.Args) {
				name, def, hasDef := strings.Cut(a, "=")
				if strings.HasPrefix(name, "TARGET") || strings.HasPrefix(name, "BUILD") {
					declared[name] = true
					if hasDef {
						t.Errorf("%s: ARG %s has the default %q: --platform would not override it", StarDockerfile, name, def)
					}
				}
			}
		}
	}
	for _, a := range []string{"TARGETOS", "TARGETARCH"} {
		if !declared[a] {
			t.Errorf("%s does not declare ARG %s: the build stage would not see the target platform", StarDockerfile, a)
		}
	}
}

// TestImagesPinned: every container image of every task definition is the
// star's own asset or a pinned release tag, never latest or untagged.
func TestImagesPinned(t *testing.T) {
	s := threeStars(t)
	tagged := regexp.MustCompile(`^[a-z0-9./-]+:[0-9]+(\.[0-9a-z]+)+$`)
	n := 0
	for id, r := range s.ofType("AWS::ECS::TaskDefinition") {
		for _, c := range props(r)["ContainerDefinitions"].([]any) {
			c := c.(map[string]any)
			img := c["Image"]
			if str, ok := img.(string); ok {
				n++
				if !tagged.MatchString(str) || strings.HasSuffix(str, ":latest") {
					t.Errorf("%s/%v: image %q is not pinned to a release tag", id, c["Name"], str)
				}
				continue
			}
			// The star's image: the asset's content hash in the CDK's
			// asset repository.
			if !strings.Contains(js(img), "cdk-hnb659fds-container-assets") {
				t.Errorf("%s/%v: image %s is neither pinned nor the star's asset", id, c["Name"], js(img))
			}
		}
	}
	if n != s.cfg.StarCount {
		t.Errorf("%d registry images, want one agent per star (%d)", n, s.cfg.StarCount)
	}
	if !strings.HasSuffix(AgentImage, ":"+AgentVersion) {
		t.Errorf("AgentImage %s is not pinned to AgentVersion %s", AgentImage, AgentVersion)
	}
}

// TestStarDeletesItsProbe: the task role may delete the start-up probe's
// object in the Standard chain bucket, and nothing else there.
func TestStarDeletesItsProbe(t *testing.T) {
	s := defaults(t)
	task := grants(t, s, "StarTaskRole")
	dels := task["s3:DeleteObject"]
	if len(dels) == 0 {
		t.Fatalf("the star cannot delete %s objects: one leaks per task start", ProbePrefix)
	}
	for _, r := range dels {
		if !strings.Contains(r, "StorageChain") || !strings.Contains(r, "/"+ProbePrefix+"*") {
			t.Errorf("star DeleteObject on %s, want only the chain bucket's %s*", r, ProbePrefix)
		}
	}
	// The prefix is the one shared/star's probe writes under.
	src, err := os.ReadFile(filepath.Join(repoRoot, "shared", "star", "commit.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), `key := fmt.Sprintf("`+ProbePrefix) {
		t.Errorf("shared/star/commit.go no longer writes its probe under %s", ProbePrefix)
	}
}

// TestStarMemory: in every task the star container and the agent sidecar
// have hard limits that add up to the task's memory; the star's pools,
// overhead and both backlogs fit its container (the sidecar is not counted
// twice), and GOMEMLIMIT is below the container's limit.
func TestStarMemory(t *testing.T) {
	for _, s := range []*synthesized{defaults(t), threeStars(t), withTLS(t)} {
		for id, r := range s.ofType("AWS::ECS::TaskDefinition") {
			p := props(r)
			task, err := strconv.Atoi(fmt.Sprint(p["Memory"]))
			if err != nil {
				t.Fatalf("%s: Memory %v", id, p["Memory"])
			}
			limits := map[string]int{}
			env := map[string]string{}
			for _, c := range p["ContainerDefinitions"].([]any) {
				c := c.(map[string]any)
				name := fmt.Sprint(c["Name"])
				l, ok := c["Memory"].(float64)
				if !ok {
					t.Errorf("%s/%s: no hard memory limit", id, name)
				}
				limits[name] = int(l)
				if name != "star" {
					continue
				}
				for _, kv := range c["Environment"].([]any) {
					kv := kv.(map[string]any)
					if v, ok := kv["Value"].(string); ok {
						env[fmt.Sprint(kv["Name"])] = v
					}
				}
			}
			star, agent := limits["star"], limits["cloudwatch-agent"]
			if star+agent != task || agent != AgentMemoryMiB {
				t.Errorf("%s: star %d + agent %d MiB, task %d MiB (agent should be %d)", id, star, agent, task, AgentMemoryMiB)
			}
			atoi := func(k, suffix string) int {
				n, err := strconv.Atoi(strings.TrimSuffix(env[k], suffix))
				if err != nil {
					t.Fatalf("%s: %s=%q", id, k, env[k])
				}
				return n
			}
			backlog := atoi("STRAND_S3_CHAIN_BACKLOG_MIB", "")
			pools := atoi("STRAND_S3_MEMORY_BUFFER_MIB", "") + atoi("STRAND_S3_EXPRESS_MEMORY_BUFFER_MIB", "")
			// The pass index window cache and the dedupe tables at their
			// bounds, from the star's own settings (768 B a producer).
			window := atoi("STRAND_WINDOW_CACHE_MIB", "")
			dedupe := (atoi("STRAND_DEDUPE_MAX_PRODUCERS", "")*DedupeBytesPerProducer + 1<<20 - 1) >> 20
			if worst := pools + 2*backlog + StarOverheadMiB + window + dedupe; worst > star {
				t.Errorf("%s: pools %d + 2 x backlog %d + overhead %d + window cache %d + dedupe %d = %d MiB > the star container's %d MiB",
					id, pools, backlog, StarOverheadMiB, window, dedupe, worst, star)
			}
			if lim := atoi("GOMEMLIMIT", "MiB"); lim >= star || lim < pools+2*backlog {
				t.Errorf("%s: GOMEMLIMIT %d MiB, want under the container's %d and over pools and backlogs %d", id, lim, star, pools+2*backlog)
			}
		}
	}
}

// TestLambdaMemory: every settlement Lambda has a GOMEMLIMIT under its
// memory (so a settle step's garbage is collected before it counts toward
// the limit) and over its window cache budget, with the pass index on and
// off.
func TestLambdaMemory(t *testing.T) {
	off := synth(t, "refsmode", map[string]any{CtxPassIndex: "false", CtxStarCount: float64(2)})
	for _, s := range []*synthesized{defaults(t), off} {
		seen := 0
		for id, r := range s.ofType("AWS::Lambda::Function") {
			p := props(r)
			env := map[string]string{}
			if e, ok := p["Environment"].(map[string]any); ok {
				for k, v := range e["Variables"].(map[string]any) {
					if v, ok := v.(string); ok {
						env[k] = v
					}
				}
			}
			if env[EnvPassIndex] == "" {
				continue // not a settlement function (a CDK custom resource)
			}
			seen++
			mem, ok := p["MemorySize"].(float64)
			if !ok {
				t.Fatalf("%s: MemorySize %v", id, p["MemorySize"])
			}
			lim, err := strconv.Atoi(strings.TrimSuffix(env["GOMEMLIMIT"], "MiB"))
			if err != nil || !strings.HasSuffix(env["GOMEMLIMIT"], "MiB") {
				t.Fatalf("%s: GOMEMLIMIT=%q", id, env["GOMEMLIMIT"])
			}
			window := 0
			if w := env[EnvWindowCacheMiB]; w != "" {
				if window, err = strconv.Atoi(w); err != nil {
					t.Fatalf("%s: %s=%q", id, EnvWindowCacheMiB, w)
				}
			}
			if lim >= int(mem) || lim <= window {
				t.Errorf("%s: GOMEMLIMIT %d MiB, want under its memory %d MiB and over its window cache %d MiB", id, lim, int(mem), window)
			}
		}
		if seen != len(FunctionNames) {
			t.Errorf("%d settlement functions with the pass index variable, want %d", seen, len(FunctionNames))
		}
	}
}

// TestStopTimeoutFollowsDrainBudget: the star container's stop timeout is
// its drain budget plus a margin, so ECS neither kills a draining star nor
// waits minutes for one that has exited (it was a fixed 120 s with no
// drain behind it).
func TestStopTimeoutFollowsDrainBudget(t *testing.T) {
	for id, r := range defaults(t).ofType("AWS::ECS::TaskDefinition") {
		for _, c := range props(r)["ContainerDefinitions"].([]any) {
			c := c.(map[string]any)
			if fmt.Sprint(c["Name"]) != "star" {
				continue
			}
			budget := ""
			for _, kv := range c["Environment"].([]any) {
				kv := kv.(map[string]any)
				if kv["Name"] == "STRAND_DRAIN_BUDGET" {
					budget = fmt.Sprint(kv["Value"])
				}
			}
			d, err := time.ParseDuration(budget)
			if err != nil {
				t.Fatalf("%s: STRAND_DRAIN_BUDGET %q: %v", id, budget, err)
			}
			stop, _ := c["StopTimeout"].(float64)
			if want := d.Seconds() + StopMarginSeconds; stop != want {
				t.Errorf("%s: StopTimeout %v s, want the drain budget %v + %d s", id, stop, d, StopMarginSeconds)
			}
		}
	}
}

// TestSweepsOverlapAtMostPairwise: no function reserves concurrency (on a
// new account, whose Lambda concurrency quota can be 10, any reservation
// fails the deploy: the unreserved pool may not drop below its minimum),
// and no sweep fires more often than its function's timeout, so the
// schedule alone never runs more than two copies of a sweep at once. That
// overlap is safe: settle, absorb and trim are tested with concurrent
// copies (shared/settle TestSettleConcurrentCopies, shared/absorb, and
// shared/trim TestPipelineUnderFaults); see docs/deploy.md, Sizing.
func TestSweepsOverlapAtMostPairwise(t *testing.T) {
	s := defaults(t)
	for id, r := range s.ofType("AWS::Lambda::Function") {
		if v, ok := props(r)["ReservedConcurrentExecutions"]; ok {
			t.Errorf("%s reserves concurrency %v: fails the first deploy on a new account", id, v)
		}
	}
	for name, spec := range fnSpecs {
		if spec.sweepMinutes*60 < spec.timeoutSecs {
			t.Errorf("%s: sweep every %d min but runs up to %d s: more than two sweeps may overlap", name, spec.sweepMinutes, spec.timeoutSecs)
		}
	}
}

// TestRegions: the Express set is checked against the zones S3 Express
// One Zone has in the region, and a two-zone region gets a K=2 set.
func TestRegions(t *testing.T) {
	ok := []map[string]any{
		nil,
		{CtxRegion: "us-west-2", CtxExpressAZs: "usw2-az1,usw2-az3,usw2-az4"},
		{CtxRegion: "eu-north-1", CtxExpressAZs: "eun1-az1,eun1-az2,eun1-az3"},
		{CtxRegion: "eu-west-1", CtxExpressAZs: "euw1-az1,euw1-az3"},
		{CtxRegion: "sa-east-1", CtxExpressAZs: "sae1-az1,sae1-az2,sae1-az3", CtxAllowUnlistedZones: true},
	}
	for _, m := range ok {
		if _, err := FromContext(ctx(m)); err != nil {
			t.Errorf("%v: %v", m, err)
		}
	}
	bad := []struct {
		m    map[string]any
		says string
	}{
		{map[string]any{CtxExpressAZs: "use1-az1,use1-az4,use1-az5"}, "use1-az1 is not an S3 Express One Zone zone of us-east-1"},
		{map[string]any{CtxExpressAZs: "use1-az4,use1-az5"}, "us-east-1 has 3 Express zones"},
		{map[string]any{CtxRegion: "eu-west-1", CtxExpressAZs: "euw1-az1,euw1-az2,euw1-az3"}, "euw1-az2"},
		{map[string]any{CtxRegion: "sa-east-1", CtxExpressAZs: "sae1-az1,sae1-az2,sae1-az3"}, "regions with three: eu-north-1, us-east-1, us-west-2"},
		{map[string]any{CtxRegion: "us-west-2", CtxExpressAZs: "use1-az4,use1-az5,use1-az6"}, "not an S3 Express One Zone zone of us-west-2"},
		{map[string]any{CtxExpressAZs: "use1-az4"}, "needs 3 or 2 AZ ids"},
		{map[string]any{CtxExpressAZs: "use1-az4,use1-az5,use1-az6,use1-az1"}, "needs 3 or 2 AZ ids"},
	}
	for _, c := range bad {
		_, err := FromContext(ctx(c.m))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: %v, want ErrConfig saying %q", c.m, err, c.says)
		}
	}
	if got := twoZoneRegions(); !slices.Equal(got, []string{"ap-northeast-1", "ap-south-1", "eu-west-1", "us-east-2"}) {
		t.Errorf("two-zone regions %v", got)
	}
}

// TestTwoZoneSet: a K=2 stack has two directory buckets, both in every
// reader's and writer's bucket list, with W=2, and aligned stars alternate
// between the two zones.
func TestTwoZoneSet(t *testing.T) {
	const lookup = "availability-zones:account=111111111111:region=eu-west-1"
	s := synth(t, "two-zone", map[string]any{
		CtxRegion: "eu-west-1", CtxExpressAZs: []any{"euw1-az1", "euw1-az3"}, CtxStarCount: float64(3),
		CtxAccount: "111111111111", CtxExpressAZNames: []any{"eu-west-1b", "eu-west-1a"},
		lookup: []any{"eu-west-1a", "eu-west-1b", "eu-west-1c"},
	})
	if n := len(s.ofType("AWS::S3Express::DirectoryBucket")); n != 2 {
		t.Fatalf("%d directory buckets, want 2", n)
	}
	for id, r := range s.ofType("AWS::Lambda::Function") {
		env := js(props(r)["Environment"])
		if !strings.Contains(env, `"STRAND_EXPRESS_W":"2"`) || strings.Count(env, "StorageExpress") != 2 {
			t.Errorf("%s: environment %s, want two Express buckets and W=2", id, env)
		}
	}
	zones := subnetZones(s)
	for star, subnets := range serviceSubnets(t, s) {
		i, err := strconv.Atoi(strings.TrimPrefix(star, "star-"))
		if err != nil {
			t.Fatalf("service %s", star)
		}
		// Its own zone and, for the standby, the other one.
		seen := map[string]bool{}
		for _, sn := range subnets {
			seen[zones[sn]] = true
		}
		if len(subnets) != 2 || !seen[js(s.cfg.ExpressAZNames[i%2])] || !seen[js(s.cfg.ExpressAZNames[(i+1)%2])] {
			t.Errorf("%s runs in subnets %v of zones %v, want one in each of %v", star, subnets, seen, s.cfg.ExpressAZNames)
		}
	}
}

// TestObservability: Container Insights, load balancer access logs, S3
// server access logs of the Standard buckets and VPC flow logs are on by
// default, delivered to the logs bucket, and each switch turns its part off.
func TestObservability(t *testing.T) {
	on, off := defaults(t), threeStars(t)
	cluster := func(s *synthesized) string {
		for _, r := range s.ofType("AWS::ECS::Cluster") {
			return js(props(r)["ClusterSettings"])
		}
		return ""
	}
	if c := cluster(on); !strings.Contains(c, `{"Name":"containerInsights","Value":"enabled"}`) {
		t.Errorf("Container Insights not enabled: %s", c)
	}
	if c := cluster(off); strings.Contains(c, `"enabled"`) {
		t.Errorf("Container Insights on with %s=false: %s", CtxContainerInsights, c)
	}
	var logs string
	for id := range on.ofType("AWS::S3::Bucket") {
		if strings.HasPrefix(id, "StorageLogs") {
			logs = id
		}
	}
	if logs == "" {
		t.Fatal("no logs bucket")
	}
	ref := js(map[string]any{"Ref": logs})
	for _, r := range on.ofType("AWS::ElasticLoadBalancingV2::LoadBalancer") {
		attrs := js(props(r)["LoadBalancerAttributes"])
		if !strings.Contains(attrs, `{"Key":"access_logs.s3.enabled","Value":"true"}`) || !strings.Contains(attrs, ref) {
			t.Errorf("load balancer access logs not to %s: %s", logs, attrs)
		}
	}
	for id, r := range on.ofType("AWS::S3::Bucket") {
		lc := js(props(r)["LoggingConfiguration"])
		if id == logs {
			continue
		}
		if !strings.Contains(lc, `"DestinationBucketName":`+ref) || !strings.Contains(lc, LogsPrefixS3) {
			t.Errorf("%s: server access logs %s, want %s under %s", id, lc, logs, LogsPrefixS3)
		}
	}
	flows := on.ofType("AWS::EC2::FlowLog")
	if len(flows) != 1 {
		t.Fatalf("%d flow logs, want 1", len(flows))
	}
	for id, r := range flows {
		p := props(r)
		if p["LogDestinationType"] != "s3" || p["TrafficType"] != "ALL" || p["ResourceType"] != "VPC" || !strings.Contains(js(p["LogDestination"]), logs) {
			t.Errorf("%s: %s", id, js(p))
		}
	}
	// The logs bucket lets the delivery services write (by policy: the
	// bucket takes no ACLs).
	var policy string
	for _, r := range on.ofType("AWS::S3::BucketPolicy") {
		if js(props(r)["Bucket"]) == ref {
			policy = js(props(r)["PolicyDocument"])
		}
	}
	for _, svc := range []string{"logging.s3.amazonaws.com", "delivery.logs.amazonaws.com"} {
		if !strings.Contains(policy, svc) {
			t.Errorf("the logs bucket policy does not let %s write: %s", svc, policy)
		}
	}
	// Switched off: no logs bucket, no logging, no flow log.
	for id, r := range off.ofType("AWS::S3::Bucket") {
		if strings.HasPrefix(id, "StorageLogs") || props(r)["LoggingConfiguration"] != nil {
			t.Errorf("%s: logs bucket or access logs with the switches off", id)
		}
	}
	for _, r := range off.ofType("AWS::ElasticLoadBalancingV2::LoadBalancer") {
		if attrs := js(props(r)["LoadBalancerAttributes"]); strings.Contains(attrs, `"access_logs.s3.enabled","Value":"true"`) {
			t.Errorf("load balancer access logs with %s=false: %s", CtxNLBAccessLogs, attrs)
		}
	}
	if n := len(off.ofType("AWS::EC2::FlowLog")); n != 0 {
		t.Errorf("%d flow logs with %s=false", n, CtxFlowLogs)
	}
}

// TestDockerfileMatchesTask: the star image's final stage exposes the
// ports the task maps and starts the star binary (the image itself is built
// offline and run in package bundle's TestStarImageOffline).
func TestDockerfileMatchesTask(t *testing.T) {
	stages := starStages(t)
	final := stages[len(stages)-1]
	var expose, entry string
	for _, in := range final.Instrs {
		switch in.Cmd {
		case "EXPOSE":
			expose = in.Args
		case "ENTRYPOINT":
			entry = in.Args
		}
	}
	if want := fmt.Sprintf("%d %d", APIPort, AdminPort); expose != want {
		t.Errorf("EXPOSE %q, want %q (the task's port mappings)", expose, want)
	}
	if entry != `["/star"]` {
		t.Errorf("ENTRYPOINT %s, want [\"/star\"]", entry)
	}
}

// TestExpressSessionModeMatchesGrant: a function whose role may create
// only ReadOnly Express sessions tells its S3 client to ask for ReadOnly
// ones (the SDK's default asks for ReadWrite and would be refused), and no
// other function does.
func TestExpressSessionModeMatchesGrant(t *testing.T) {
	s := defaults(t)
	src, err := os.ReadFile(filepath.Join(repoRoot, "shared", "objstore", "s3obj", "express.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), `EnvExpressSessionMode = "`+EnvExpressSessionMode+`"`) {
		t.Fatalf("shared/objstore/s3obj no longer reads %s", EnvExpressSessionMode)
	}
	readOnly := 0
	for _, name := range FunctionNames {
		title := strings.ToUpper(name[:1]) + name[1:]
		g := grants(t, s, "Settlement"+title+"Role")
		ro := false
		for _, r := range g["s3express:CreateSession"] {
			ro = ro || strings.Contains(r, `"s3express:SessionMode":"ReadOnly"`)
		}
		var env string
		for id, r := range s.ofType("AWS::Lambda::Function") {
			if strings.HasPrefix(id, "Settlement"+title) {
				env = js(props(r)["Environment"])
			}
		}
		asks := strings.Contains(env, `"`+EnvExpressSessionMode+`":"ReadOnly"`)
		if ro != asks {
			t.Errorf("%s: role ReadOnly-only %v, client asks for ReadOnly %v (%s)", name, ro, asks, env)
		}
		if ro {
			readOnly++
		}
	}
	if readOnly != 2 {
		t.Errorf("%d functions with ReadOnly sessions, want absorb and settle", readOnly)
	}
}

// TestTargetsSeeClientAddresses: every API target group (IP targets over
// TCP, for which an NLB would otherwise pass its own address) preserves the
// client's address, so the star's per-source limit on lookups of unknown
// tokens (issue 18) keys on clients, not on the balancer's few addresses;
// and the tasks admit the balancer's security group on the API port, which
// AWS honours with client IP preservation on.
func TestTargetsSeeClientAddresses(t *testing.T) {
	for _, s := range []*synthesized{defaults(t), withTLS(t)} {
		tgs := s.ofType("AWS::ElasticLoadBalancingV2::TargetGroup")
		if len(tgs) < 2 {
			t.Fatalf("%d target groups, want the any-star group and one per star", len(tgs))
		}
		for id, r := range tgs {
			p := props(r)
			preserved := ""
			attrs, _ := p["TargetGroupAttributes"].([]any)
			for _, a := range attrs {
				a := a.(map[string]any)
				if a["Key"] == "preserve_client_ip.enabled" {
					preserved = fmt.Sprint(a["Value"])
				}
			}
			if p["TargetType"] != "ip" || p["Protocol"] != "TCP" || preserved != "true" {
				t.Errorf("%s: target type %v, protocol %v, preserve_client_ip.enabled %q: want ip, TCP, true", id, p["TargetType"], p["Protocol"], preserved)
			}
		}
		fromLB := false
		for _, r := range s.ofType("AWS::EC2::SecurityGroupIngress") {
			p := props(r)
			if p["FromPort"] == float64(APIPort) && p["SourceSecurityGroupId"] != nil {
				fromLB = true
			}
		}
		if !fromLB {
			t.Error("no ingress on the API port from a security group (the balancer's)")
		}
	}
}

// TestNotRunningAlarmOutlastsDeploy: the star-not-running alarm (no CPU
// sample from the service) waits longer than a normal deploy leaves the
// service without a task: the old task's stop timeout (the drain budget
// and margin the container definition sets) and a new task's start. It
// used 3 minutes before, which a deploy's gap (up to 25 s + 3 min) filled.
func TestNotRunningAlarmOutlastsDeploy(t *testing.T) {
	s := defaults(t)
	stop := starStopTimeout(t, s)
	found := 0
	for id, r := range s.ofType("AWS::CloudWatch::Alarm") {
		p := props(r)
		if p["MetricName"] != "CPUUtilization" || p["Statistic"] != "SampleCount" {
			continue
		}
		found++
		if p["TreatMissingData"] != "breaching" {
			t.Errorf("%s: missing data %v, want breaching (no task publishes nothing)", id, p["TreatMissingData"])
		}
		checkOutlastsReplacement(t, id, p, stop)
	}
	if found != s.cfg.StarCount {
		t.Errorf("%d star-not-running alarms, want %d", found, s.cfg.StarCount)
	}
}

// starStopTimeout is the star container's StopTimeout, seconds.
func starStopTimeout(t *testing.T, s *synthesized) float64 {
	t.Helper()
	var stop float64
	for _, r := range s.ofType("AWS::ECS::TaskDefinition") {
		for _, c := range props(r)["ContainerDefinitions"].([]any) {
			if c.(map[string]any)["Name"] == "star" {
				stop, _ = c.(map[string]any)["StopTimeout"].(float64)
			}
		}
	}
	if stop <= 0 {
		t.Fatal("no star container StopTimeout")
	}
	return stop
}

// checkOutlastsReplacement: alarm id (properties p) fires only when every
// period of its window breaches, and its window outlasts a task's
// replacement (the old task's stop, a new one's start) plus a period's
// boundary.
func checkOutlastsReplacement(t *testing.T, id string, p map[string]any, stop float64) {
	t.Helper()
	gap := stop + TaskStartSeconds
	window := p["Period"].(float64) * p["EvaluationPeriods"].(float64)
	if p["DatapointsToAlarm"] != p["EvaluationPeriods"] {
		t.Errorf("%s: %v of %v periods: want every period of the window", id, p["DatapointsToAlarm"], p["EvaluationPeriods"])
	}
	if window < gap+p["Period"].(float64) {
		t.Errorf("%s: alarms after %v s; a task's replacement leaves up to %v s (stop %v + start %d) plus a period's boundary", id, window, gap, stop, TaskStartSeconds)
	}
}

// TestNoStandbyAlarm: with strand:standby and Container Insights (the
// defaults) each star has an alarm on its service running fewer than 2
// tasks (Container Insights' RunningTaskCount, the minimum of each
// minute) for longer than a task's replacement, which a deploy (new tasks
// first, minimum healthy 100 %: the count a deployment keeps is at least
// the threshold) never causes; missing data does not fire
// it (no task at all is the star-not-running alarm's). Without
// Container Insights there is none and the synth warns; without a
// standby there is none and no warning. The dashboard graphs the count.
func TestNoStandbyAlarm(t *testing.T) {
	noStandby := func(s *synthesized) map[string]map[string]any {
		out := map[string]map[string]any{}
		for id, r := range s.ofType("AWS::CloudWatch::Alarm") {
			if props(r)["MetricName"] == MetricRunningTasks {
				out[id] = props(r)
			}
		}
		return out
	}
	warned := func(s *synthesized) bool {
		w := assertions.Annotations_FromStack(s.stack).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("without strand:containerInsights")))
		return w != nil && len(*w) > 0
	}
	s := defaults(t)
	if !s.cfg.Standby || !s.cfg.ContainerInsights {
		t.Fatal("the defaults have no standby or no Container Insights?")
	}
	stop := starStopTimeout(t, s)
	var cluster string
	for id := range s.ofType("AWS::ECS::Cluster") {
		cluster = id
	}
	// kept: the tasks a deployment of each service keeps running (desired
	// x minimum healthy percent): the least its count can fall to in a
	// deploy, which the alarm's threshold must not exceed.
	services, kept := map[string]bool{}, map[string]float64{}
	for id, r := range s.ofType("AWS::ECS::Service") {
		services[id] = false
		p := props(r)
		dc := p["DeploymentConfiguration"].(map[string]any)
		kept[id] = math.Floor(p["DesiredCount"].(float64) * dc["MinimumHealthyPercent"].(float64) / 100)
	}
	alarms := noStandby(s)
	for id, p := range alarms {
		if p["Namespace"] != "ECS/ContainerInsights" || p["Statistic"] != "Minimum" || p["Threshold"] != float64(2) ||
			p["ComparisonOperator"] != "LessThanThreshold" || p["TreatMissingData"] != "notBreaching" {
			t.Errorf("%s: %s, want ECS/ContainerInsights Minimum < 2, missing data not breaching", id, js(p))
		}
		dims := js(p["Dimensions"])
		if !strings.Contains(dims, `{"Name":"ClusterName","Value":{"Ref":"`+cluster+`"}}`) {
			t.Errorf("%s: dimensions %s, want ClusterName of %s", id, dims, cluster)
		}
		for svc := range services {
			if strings.Contains(dims, `{"Name":"ServiceName","Value":{"Fn::GetAtt":["`+svc+`","Name"]}}`) {
				services[svc] = true
				if th := p["Threshold"].(float64); th > kept[svc] {
					t.Errorf("%s: fires below %v tasks, but a deployment of %s keeps only %v running: it would fire on a deploy", id, th, svc, kept[svc])
				}
			}
		}
		checkOutlastsReplacement(t, id, p, stop)
	}
	for svc, ok := range services {
		if !ok {
			t.Errorf("no no-standby alarm on service %s (alarms %v)", svc, alarms)
		}
	}
	if len(alarms) != s.cfg.StarCount {
		t.Errorf("%d no-standby alarms, want %d", len(alarms), s.cfg.StarCount)
	}
	if warned(s) {
		t.Error("the defaults warn of no standby alarm")
	}
	graphed := func(s *synthesized) bool {
		for _, r := range s.ofType("AWS::CloudWatch::Dashboard") {
			body := js(props(r)["DashboardBody"])
			return strings.Contains(body, "Star tasks running") && strings.Contains(body, MetricRunningTasks)
		}
		return false
	}
	if !graphed(s) {
		t.Error("the dashboard does not graph the stars' running tasks")
	}
	if off := threeStars(t); len(noStandby(off)) != 0 || !warned(off) || graphed(off) {
		t.Errorf("without Container Insights: %d no-standby alarms, warned %v, graphed %v; want none, a warning, no graph", len(noStandby(off)), warned(off), graphed(off))
	}
	if one := synth(t, "no-standby", map[string]any{CtxStandby: "false"}); len(noStandby(one)) != 0 || warned(one) {
		t.Errorf("without a standby: %d no-standby alarms, warned %v; want none and no warning", len(noStandby(one)), warned(one))
	}
}

// TestFlowLogsDeliveryPolicy: with flow logs on, the logs bucket's policy
// (which the stack owns and rewrites on every update) grants the log
// delivery service its PutObject under the flow log prefix, for this
// account's logs only, so an update cannot drop the grant AWS would
// otherwise add out of band (@aws-cdk/aws-s3:createDefaultLoggingPolicy).
func TestFlowLogsDeliveryPolicy(t *testing.T) {
	s := defaults(t)
	if !s.cfg.FlowLogs {
		t.Fatal("flow logs are off by default?")
	}
	put, acl := false, false
	for _, r := range s.ofType("AWS::S3::BucketPolicy") {
		for _, st := range props(r)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			m := st.(map[string]any)
			if m["Effect"] != "Allow" || !strings.Contains(js(m["Principal"]), "delivery.logs.amazonaws.com") {
				continue
			}
			cond := js(m["Condition"])
			if !strings.Contains(cond, "aws:SourceAccount") || !strings.Contains(cond, ":logs:") {
				continue
			}
			actions := anyStrings(m["Action"])
			if slices.Contains(actions, "s3:PutObject") && strings.Contains(js(m["Resource"]), LogsPrefixFlow) {
				put = true
			}
			if slices.Contains(actions, "s3:GetBucketAcl") {
				acl = true
			}
		}
	}
	if !put || !acl {
		t.Errorf("logs bucket policy: flow log PutObject grant %v, GetBucketAcl grant %v; want both", put, acl)
	}
}
