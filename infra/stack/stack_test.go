package stack

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

func TestMain(m *testing.M) {
	wd, _ := os.Getwd()
	root, err := FindRepoRoot(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	repoRoot = root
	if err := SetupEnv(root); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	jsii.Close() // restart the kernel with the environment above
	code := m.Run()
	jsii.Close()
	for _, d := range synthDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

var repoRoot string

// synthesized is one synthesized stack, as the assertions library sees it
// and as plain JSON to walk.
type synthesized struct {
	cfg    Config
	outdir string // the cloud assembly
	stack  awscdk.Stack
	tmpl   assertions.Template
	res    map[string]map[string]any // logical id -> resource
}

var (
	synthMu sync.Mutex
	synths  = map[string]*synthesized{}
	// synthDirs outlive the test that synthesized first (later tests
	// reuse the assembly); TestMain removes them.
	synthDirs []string
)

// synth synthesizes the stack for context values once per test binary.
func synth(t *testing.T, name string, values map[string]any) *synthesized {
	t.Helper()
	synthMu.Lock()
	defer synthMu.Unlock()
	if s := synths[name]; s != nil {
		return s
	}
	cfg, err := FromContext(ctx(values))
	if err != nil {
		t.Fatal(err)
	}
	outdir, err := os.MkdirTemp("", "strand-synth-")
	if err != nil {
		t.Fatal(err)
	}
	synthDirs = append(synthDirs, outdir)
	// The values are app context too: lookups the CLI would answer
	// (availability-zones:...) are given this way.
	appCtx := map[string]any{}
	for k, v := range values {
		appCtx[k] = v
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outdir), Context: &appCtx})
	st, err := NewStrand(app, "Strand", cfg, repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	// Every synthesized stack passes cdk-nag's AwsSolutions pack
	// (TestNagAwsSolutions reads its findings from the cloud assembly).
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(nil), nil)
	tmpl := assertions.Template_FromStack(st.Stack, nil)
	app.Synth(nil)
	raw, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resources map[string]map[string]any
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	s := &synthesized{cfg: cfg, outdir: outdir, stack: st.Stack, tmpl: tmpl, res: doc.Resources}
	synths[name] = s
	return s
}

func defaults(t *testing.T) *synthesized { return synth(t, "defaults", nil) }

func threeStars(t *testing.T) *synthesized {
	return synth(t, "three", map[string]any{
		CtxStarCount: float64(3), CtxDeletionProtection: false, CtxNatGateways: float64(0), CtxPublicAPI: true,
		CtxAllowPlaintextPublic: true,
		// The cheapest stack: no observability extras.
		CtxContainerInsights: false, CtxNLBAccessLogs: "false", CtxS3AccessLogs: false, CtxFlowLogs: false,
	})
}

// testCertificate is a well-formed ACM certificate ARN in the default region.
const testCertificate = "arn:aws:acm:us-east-1:111111111111:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789"

// withTLS: two stars behind a public load balancer that terminates TLS.
func withTLS(t *testing.T) *synthesized {
	return synth(t, "tls", map[string]any{
		CtxStarCount: float64(2), CtxPublicAPI: true, CtxCertificateARN: testCertificate, CtxAPIHostname: "api.example.com",
	})
}

// azLookup is the context key of the CLI's availability-zone lookup for
// the test account in us-east-1.
const azLookup = "availability-zones:account=111111111111:region=us-east-1"

// aligned: four stars placed in the Express zones (star-3 wraps to zone 0),
// the account's zone lookup answered as the CLI would.
func aligned(t *testing.T) *synthesized {
	return synth(t, "aligned", map[string]any{
		CtxStarCount: float64(4), CtxAccount: "111111111111",
		CtxExpressAZNames: []any{"us-east-1c", "us-east-1a", "us-east-1d"},
		azLookup:          []any{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"},
	})
}

// assert runs an assertions-library check, turning its panic into a failure.
func assert(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	f()
}

func (s *synthesized) ofType(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.res {
		if r["Type"] == typ {
			out[id] = r
		}
	}
	return out
}

func props(r map[string]any) map[string]any { return r["Properties"].(map[string]any) }

// js renders a value as JSON, for substring checks on intrinsic functions.
func js(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestResourceCounts(t *testing.T) {
	for _, s := range []*synthesized{defaults(t), threeStars(t), withTLS(t), aligned(t)} {
		n := s.cfg.StarCount
		logs, flow := 0, 0
		if s.cfg.LogsBucket() {
			logs = 1
		}
		if s.cfg.FlowLogs {
			flow = 1
		}
		noStandby := 0
		if s.cfg.Standby && s.cfg.ContainerInsights {
			noStandby = 1
		}
		counts := map[string]int{
			"AWS::EC2::FlowLog":                         flow,
			"AWS::S3Express::DirectoryBucket":           3,
			"AWS::S3Express::BucketPolicy":              3,
			"AWS::S3::Bucket":                           2 + logs,
			"AWS::S3::BucketPolicy":                     2 + logs,
			"AWS::DynamoDB::Table":                      1,
			"AWS::Lambda::Function":                     4,
			"AWS::Lambda::EventSourceMapping":           2,
			"AWS::SQS::Queue":                           4,
			"AWS::Events::Rule":                         4,
			"AWS::ECS::Cluster":                         1,
			"AWS::ECS::Service":                         n,
			"AWS::ECS::TaskDefinition":                  n,
			"AWS::ElasticLoadBalancingV2::LoadBalancer": 1,
			"AWS::ElasticLoadBalancingV2::Listener":     n + 1,
			"AWS::ElasticLoadBalancingV2::TargetGroup":  n + 1,
			"AWS::EC2::VPC":                             1,
			"AWS::EC2::VPCEndpoint":                     3,
			"AWS::EC2::NatGateway":                      s.cfg.NatGateways,
			// 2 queue ages + per star (backlog age, not running, no
			// standby with Container Insights) + causes + 2 DLQs + 4 Lambdas
			"AWS::CloudWatch::Alarm":     2 + 2*n + noStandby*n + len(StallCauses) + 2 + 4,
			"AWS::CloudWatch::Dashboard": 1,
		}
		for typ, want := range counts {
			assert(t, fmt.Sprintf("%d stars: %s", n, typ), func() { s.tmpl.ResourceCountIs(jsii.String(typ), jsii.Number(want)) })
		}
	}
}

func TestExpressSet(t *testing.T) {
	s := defaults(t)
	got := map[string]bool{}
	for id, r := range s.ofType("AWS::S3Express::DirectoryBucket") {
		p := props(r)
		if p["DataRedundancy"] != "SingleAvailabilityZone" {
			t.Errorf("%s: DataRedundancy %v", id, p["DataRedundancy"])
		}
		az := p["LocationName"].(string)
		got[az] = true
		if name := js(p["BucketName"]); !strings.Contains(name, "--"+az+"--x-s3") || !strings.Contains(name, "AWS::AccountId") {
			t.Errorf("%s: name %s is not <prefix>-<account>--%s--x-s3", id, name, az)
		}
		if enc := js(p["BucketEncryption"]); !strings.Contains(enc, `"SSEAlgorithm":"AES256"`) {
			t.Errorf("%s: encryption %s", id, enc)
		}
		if lc := js(p["LifecycleConfiguration"]); !strings.Contains(lc, `"AbortIncompleteMultipartUpload":{"DaysAfterInitiation":1}`) {
			t.Errorf("%s: lifecycle %s", id, lc)
		}
		// DeletionPolicy: TestBucketsRetainExceptOnCreate.
	}
	for _, az := range s.cfg.ExpressAZs {
		if !got[az] {
			t.Errorf("no directory bucket in %s", az)
		}
	}
}

// tlsOnly reports whether a bucket policy document denies insecure transport.
func tlsOnly(doc any) bool {
	for _, st := range doc.(map[string]any)["Statement"].([]any) {
		m := st.(map[string]any)
		if m["Effect"] == "Deny" && strings.Contains(js(m["Condition"]), `"aws:SecureTransport":"false"`) {
			return true
		}
	}
	return false
}

func TestBucketsPrivateEncryptedTLSOnly(t *testing.T) {
	s := defaults(t)
	for id, r := range s.ofType("AWS::S3::Bucket") {
		p := props(r)
		pab := p["PublicAccessBlockConfiguration"].(map[string]any)
		for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
			if pab[k] != true {
				t.Errorf("%s: %s = %v", id, k, pab[k])
			}
		}
		if enc := js(p["BucketEncryption"]); !strings.Contains(enc, `"SSEAlgorithm":"AES256"`) {
			t.Errorf("%s: encryption %s", id, enc)
		}
		if lc := js(p["LifecycleConfiguration"]); !strings.Contains(lc, `"AbortIncompleteMultipartUpload":{"DaysAfterInitiation":1}`) {
			t.Errorf("%s: lifecycle %s", id, lc)
		}
		lc := js(p["LifecycleConfiguration"])
		if strings.HasPrefix(id, "StorageLogs") {
			// Access and flow logs are not data: they expire.
			if !strings.Contains(lc, fmt.Sprintf(`"ExpirationInDays":%d`, s.cfg.RetentionDays)) {
				t.Errorf("%s: logs do not expire after %d days: %s", id, s.cfg.RetentionDays, lc)
			}
			continue
		}
		if strings.Contains(lc, "ExpirationInDays") {
			t.Errorf("%s: a lifecycle rule expires data (trim is the only deleter): %s", id, lc)
		}
	}
	// Every bucket, Standard and directory, has a TLS-only policy.
	covered := map[string]bool{}
	for _, typ := range []string{"AWS::S3::BucketPolicy", "AWS::S3Express::BucketPolicy"} {
		for id, r := range s.ofType(typ) {
			p := props(r)
			if !tlsOnly(p["PolicyDocument"]) {
				t.Errorf("%s: policy does not deny insecure transport", id)
			}
			covered[js(p["Bucket"])] = true
		}
	}
	for _, typ := range []string{"AWS::S3::Bucket", "AWS::S3Express::DirectoryBucket"} {
		for id := range s.ofType(typ) {
			if !covered[js(map[string]any{"Ref": id})] {
				t.Errorf("bucket %s has no TLS-only policy", id)
			}
		}
	}
}

func TestTable(t *testing.T) {
	assert(t, "table", func() {
		defaults(t).tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"BillingMode":                      "PAY_PER_REQUEST",
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
			"DeletionProtectionEnabled":        true,
			"KeySchema": []any{
				map[string]any{"AttributeName": "PK", "KeyType": "HASH"},
				map[string]any{"AttributeName": "SK", "KeyType": "RANGE"},
			},
		})
	})
	for id, r := range defaults(t).ofType("AWS::DynamoDB::Table") {
		if r["DeletionPolicy"] != "Retain" {
			t.Errorf("%s: deletion policy %v", id, r["DeletionPolicy"])
		}
	}
	// Deletion protection off: the table can be deleted with the stack.
	for id, r := range threeStars(t).ofType("AWS::DynamoDB::Table") {
		if props(r)["DeletionProtectionEnabled"] != false || r["DeletionPolicy"] != "Delete" {
			t.Errorf("%s: protection %v policy %v, want off/Delete", id, props(r)["DeletionProtectionEnabled"], r["DeletionPolicy"])
		}
	}
}

func TestQueuesAndTriggers(t *testing.T) {
	s := defaults(t)
	queues := s.ofType("AWS::SQS::Queue")
	var dlqs, mains int
	for id, r := range queues {
		p := props(r)
		if p["SqsManagedSseEnabled"] != true {
			t.Errorf("%s: not encrypted", id)
		}
		rp, ok := p["RedrivePolicy"].(map[string]any)
		if !ok {
			dlqs++
			continue
		}
		mains++
		target := rp["deadLetterTargetArn"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
		dlq, ok := queues[target]
		if !ok {
			t.Errorf("%s: DLQ %s is not a queue of the stack", id, target)
			continue
		}
		if rp["maxReceiveCount"] != float64(maxReceives) {
			t.Errorf("%s: maxReceiveCount %v", id, rp["maxReceiveCount"])
		}
		if props(dlq)["FifoQueue"] != p["FifoQueue"] {
			t.Errorf("%s: FIFO %v but its DLQ %v", id, p["FifoQueue"], props(dlq)["FifoQueue"])
		}
	}
	if mains != 2 || dlqs != 2 {
		t.Errorf("%d queues with a DLQ and %d DLQs, want 2 and 2", mains, dlqs)
	}
	// The release queue is FIFO (message group per chain).
	for id, r := range queues {
		if strings.Contains(id, "Release") && !strings.Contains(id, "DLQ") && props(r)["FifoQueue"] != true {
			t.Errorf("%s: release queue is not FIFO", id)
		}
	}
	esms := s.ofType("AWS::Lambda::EventSourceMapping")
	fns := map[string]bool{}
	for id, r := range esms {
		p := props(r)
		if !slices.Contains(anyStrings(p["FunctionResponseTypes"]), "ReportBatchItemFailures") {
			t.Errorf("%s: no partial-batch responses", id)
		}
		fns[js(p["FunctionName"])] = true
	}
	for _, name := range []string{"absorb", "probe"} {
		found := false
		for f := range fns {
			if strings.Contains(strings.ToLower(f), "settlement"+name) {
				found = true
			}
		}
		if !found {
			t.Errorf("no SQS trigger for %s (mappings to %v)", name, fns)
		}
	}
}

func anyStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, e := range l {
			out = append(out, fmt.Sprint(e))
		}
	} else if v != nil {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

func TestLambdas(t *testing.T) {
	s := defaults(t)
	fns := s.ofType("AWS::Lambda::Function")
	for id, r := range fns {
		p := props(r)
		if p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" || js(p["Architectures"]) != `["arm64"]` {
			t.Errorf("%s: runtime %v handler %v arch %v", id, p["Runtime"], p["Handler"], p["Architectures"])
		}
		env := js(p["Environment"])
		for _, k := range []string{"STRAND_TABLE", "STRAND_EXPRESS_BUCKETS", "STRAND_STANDARD_BUCKET", "STRAND_SETTLED_BUCKET", "STRAND_STARS"} {
			if !strings.Contains(env, k) {
				t.Errorf("%s: no %s", id, k)
			}
		}
		if !strings.Contains(env, `"STRAND_EXPRESS_W":"2"`) {
			t.Errorf("%s: STRAND_EXPRESS_W is not 2 (the star's quorum): %s", id, env)
		}
	}
	// One schedule per function.
	targets := map[string]bool{}
	for id, r := range s.ofType("AWS::Events::Rule") {
		p := props(r)
		if !strings.HasPrefix(fmt.Sprint(p["ScheduleExpression"]), "rate(") {
			t.Errorf("%s: schedule %v", id, p["ScheduleExpression"])
		}
		for _, tg := range p["Targets"].([]any) {
			targets[js(tg.(map[string]any)["Arn"])] = true
			// The handlers take a sweep only from the scheduled event
			// itself (its "detail-type"); a custom input would be refused.
			for _, k := range []string{"Input", "InputPath", "InputTransformer"} {
				if v, ok := tg.(map[string]any)[k]; ok {
					t.Errorf("%s: target has %s %v; the handlers need the scheduled event", id, k, v)
				}
			}
		}
	}
	for id := range fns {
		if !targets[js(map[string]any{"Fn::GetAtt": []any{id, "Arn"}})] {
			t.Errorf("%s has no schedule", id)
		}
	}
}

// statements returns every statement of every AWS::IAM::Policy, with the
// policy's logical id.
func statements(s *synthesized) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for id, r := range s.ofType("AWS::IAM::Policy") {
		for _, st := range props(r)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			out[id] = append(out[id], st.(map[string]any))
		}
	}
	return out
}

func TestIAMNoWildcardActions(t *testing.T) {
	for _, s := range []*synthesized{defaults(t), threeStars(t)} {
		pols := statements(s)
		if len(pols) < 6 {
			t.Fatalf("found %d IAM policies, want one per function, task and execution role", len(pols))
		}
		for id, sts := range pols {
			for _, st := range sts {
				if st["Effect"] != "Allow" {
					continue
				}
				actions := anyStrings(st["Action"])
				for _, a := range actions {
					if strings.Contains(a, "*") {
						t.Errorf("%s: wildcard action %q", id, a)
					}
				}
				// Resource "*" only where the action has no resource type.
				if slices.Contains(anyStrings(st["Resource"]), "*") {
					for _, a := range actions {
						if a != "ecr:GetAuthorizationToken" {
							t.Errorf("%s: %s on every resource", id, a)
						}
					}
				}
			}
		}
	}
}

// grants returns, for the policy whose id starts with prefix, every allowed
// action mapped to the JSON of its resources and conditions.
func grants(t *testing.T, s *synthesized, prefix string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for id, sts := range statements(s) {
		if !strings.HasPrefix(id, prefix) {
			continue
		}
		for _, st := range sts {
			for _, a := range anyStrings(st["Action"]) {
				out[a] = append(out[a], js(st["Resource"])+js(st["Condition"]))
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no policy %s*", prefix)
	}
	return out
}

func TestLeastPrivilege(t *testing.T) {
	s := defaults(t)
	has := func(g map[string][]string, action, substr string) bool {
		for _, r := range g[action] {
			if strings.Contains(r, substr) {
				return true
			}
		}
		return false
	}
	absorb := grants(t, s, "SettlementAbsorbRole")
	settle := grants(t, s, "SettlementSettleRole")
	trim := grants(t, s, "SettlementTrimRole")
	probe := grants(t, s, "SettlementProbeRole")
	task := grants(t, s, "StarTaskRole")

	// Readers of the Express set get ReadOnly sessions; deleters and the
	// writer get ReadWrite ones.
	for name, g := range map[string]map[string][]string{"absorb": absorb, "settle": settle} {
		if !has(g, "s3express:CreateSession", `"s3express:SessionMode":"ReadOnly"`) {
			t.Errorf("%s: CreateSession not restricted to ReadOnly: %v", name, g["s3express:CreateSession"])
		}
		if g["sqs:SendMessage"] != nil {
			t.Errorf("%s may sqs:SendMessage", name)
		}
	}
	if absorb["s3:DeleteObject"] != nil {
		t.Errorf("absorb may DeleteObject: %v", absorb["s3:DeleteObject"])
	}
	// settle deletes a settled object after merging it into a larger one;
	// it never deletes a slot (trim does, behind the trimmed cursor).
	if !has(settle, "s3:DeleteObject", "StorageSettled") || has(settle, "s3:DeleteObject", "StorageChain") {
		t.Errorf("settle DeleteObject: %v", settle["s3:DeleteObject"])
	}
	if !onPrefix(settle["s3:DeleteObject"], SettledPrefix) {
		t.Errorf("settle DeleteObject is not limited to %s*: %v", SettledPrefix, settle["s3:DeleteObject"])
	}
	// trim reads each copy's envelope before deleting it (it never deletes
	// poison): GetObject on chains, ListBucket so that a missing copy is a
	// 404, and a ReadWrite Express session (below), which reads and deletes.
	var trimChainGets []string
	for _, r := range trim["s3:GetObject"] {
		if strings.Contains(r, "StorageChain") {
			trimChainGets = append(trimChainGets, r)
		}
	}
	if !onPrefix(trimChainGets, ChainPrefix) {
		t.Errorf("trim GetObject on the chain buckets: %v", trim["s3:GetObject"])
	}
	if !has(trim, "s3:ListBucket", "StorageChain") {
		t.Errorf("trim ListBucket: %v", trim["s3:ListBucket"])
	}
	// On the pass index (the default) trim reads the window's indexes
	// before it deletes a stream's metadata, and no other settled object.
	for _, r := range trim["s3:GetObject"] {
		if strings.Contains(r, "StorageSettled") && !strings.Contains(r, "/"+IndexPrefix+"*") {
			t.Errorf("trim reads settled objects: %v", trim["s3:GetObject"])
		}
	}
	for name, g := range map[string]map[string][]string{"trim": trim, "probe": probe, "star": task} {
		if g["s3express:CreateSession"] == nil || has(g, "s3express:CreateSession", "ReadOnly") {
			t.Errorf("%s: want a ReadWrite CreateSession, got %v", name, g["s3express:CreateSession"])
		}
	}
	// Only settle writes settled objects; only the star writes chains.
	if !has(settle, "s3:PutObject", "StorageSettled") || has(settle, "s3:PutObject", "StorageChain") {
		t.Errorf("settle PutObject: %v", settle["s3:PutObject"])
	}
	if !has(task, "s3:PutObject", "StorageChain") || has(task, "s3:PutObject", "StorageSettled") {
		t.Errorf("star PutObject: %v", task["s3:PutObject"])
	}
	if trim["s3:PutObject"] != nil {
		t.Errorf("trim may PutObject")
	}
	// absorb writes only pass indexes (the pass index is on by default).
	if !onPrefix(absorb["s3:PutObject"], IndexPrefix) || has(absorb, "s3:PutObject", "StorageChain") {
		t.Errorf("absorb PutObject: %v", absorb["s3:PutObject"])
	}
	// probe writes only its orphan markers.
	if !onPrefix(probe["s3:PutObject"], OrphanMarkPrefix) || has(probe, "s3:PutObject", "StorageChain") {
		t.Errorf("probe PutObject: %v", probe["s3:PutObject"])
	}
	// trim deletes from the chain and settled buckets; probe too (garbage
	// above a cut, orphans after their grace period).
	if !has(trim, "s3:DeleteObject", "StorageChain") || !has(trim, "s3:DeleteObject", "StorageSettled") {
		t.Errorf("trim DeleteObject: %v", trim["s3:DeleteObject"])
	}
	if !has(probe, "s3:DeleteObject", "StorageChain") || !has(probe, "s3:DeleteObject", "StorageSettled") {
		t.Errorf("probe DeleteObject: %v", probe["s3:DeleteObject"])
	}
	// Nobody scans the table (the metastore lists streams by Query).
	for name, g := range map[string]map[string][]string{"absorb": absorb, "settle": settle, "trim": trim, "probe": probe, "star": task} {
		if g["dynamodb:Scan"] != nil {
			t.Errorf("%s may Scan", name)
		}
	}
	// Nobody is granted batch actions the metastore does not use.
	for name, g := range map[string]map[string][]string{"absorb": absorb, "settle": settle, "trim": trim, "probe": probe, "star": task} {
		for _, a := range []string{"dynamodb:BatchWriteItem", "dynamodb:BatchGetItem"} {
			if g[a] != nil {
				t.Errorf("%s may %s, which the metastore never calls", name, a)
			}
		}
	}
	// probe reads the table but never writes it.
	for _, a := range tableWrite {
		if probe[a] != nil {
			t.Errorf("probe may %s", a)
		}
	}
	// The star publishes releases and fences, and nothing else to SQS.
	if !has(task, "sqs:SendMessage", "SettlementRelease") || !has(task, "sqs:SendMessage", "SettlementFence") {
		t.Errorf("star SendMessage: %v", task["sqs:SendMessage"])
	}
	for a := range task {
		if strings.HasPrefix(a, "sqs:") && a != "sqs:SendMessage" {
			t.Errorf("star may %s", a)
		}
	}
	// Functions log to their own group only.
	if !has(absorb, "logs:PutLogEvents", "SettlementAbsorbLogs") || has(absorb, "logs:PutLogEvents", "SettlementSettleLogs") {
		t.Errorf("absorb logs: %v", absorb["logs:PutLogEvents"])
	}
	// No function uses the managed basic execution policy (every log group).
	for id, r := range s.ofType("AWS::IAM::Role") {
		if p := props(r); p["ManagedPolicyArns"] != nil {
			t.Errorf("%s has managed policies %v", id, p["ManagedPolicyArns"])
		}
	}
}

// onPrefix reports whether every resource of a grant is under prefix of a
// bucket (".../<prefix>*").
func onPrefix(resources []string, prefix string) bool {
	if len(resources) == 0 {
		return false
	}
	for _, r := range resources {
		if !strings.Contains(r, "/"+prefix+"*") {
			return false
		}
	}
	return true
}

// starEnv returns the star container's environment of every task
// definition, by the STRAND_STAR_ID it sets, and the container.
func starEnv(t *testing.T, s *synthesized) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for id, r := range s.ofType("AWS::ECS::TaskDefinition") {
		var star map[string]any
		for _, c := range props(r)["ContainerDefinitions"].([]any) {
			if c.(map[string]any)["Name"] == "star" {
				star = c.(map[string]any)
			}
		}
		if star == nil {
			t.Fatalf("%s: no star container", id)
		}
		env := map[string]any{}
		for _, e := range star["Environment"].([]any) {
			env[e.(map[string]any)["Name"].(string)] = e.(map[string]any)["Value"]
		}
		out[fmt.Sprint(env["STRAND_STAR_ID"])] = env
		if star["Command"] != nil {
			t.Errorf("%s: the star container has a command %v; its configuration is the environment", id, star["Command"])
		}
	}
	return out
}

// TestStarEnvironment checks the task environment against the flags of
// functions/star (STRAND_<FLAG>): every name the ECS task sets must be a
// flag the binary reads.
func TestStarEnvironment(t *testing.T) {
	for _, s := range []*synthesized{defaults(t), threeStars(t), withTLS(t)} {
		envs := starEnv(t, s)
		if len(envs) != s.cfg.StarCount {
			t.Fatalf("%d star environments, want %d", len(envs), s.cfg.StarCount)
		}
		for i := range s.cfg.StarCount {
			star := StarID(i)
			env, ok := envs[star]
			if !ok {
				t.Fatalf("no task with STRAND_STAR_ID=%s", star)
			}
			for _, k := range []string{"STRAND_TABLE", "STRAND_EXPRESS_BUCKETS", "STRAND_STANDARD_BUCKET", "STRAND_SETTLED_BUCKET",
				"STRAND_RELEASE_QUEUE_URL", "STRAND_FENCE_QUEUE_URL", "STRAND_REGION"} {
				if env[k] == nil || js(env[k]) == `""` {
					t.Errorf("%s: no %s", star, k)
				}
			}
			fixed := map[string]string{
				"STRAND_EXPRESS_W":                    "2",
				"STRAND_ADDR":                         fmt.Sprintf(":%d", APIPort),
				"STRAND_ADMIN_ADDR":                   fmt.Sprintf(":%d", AdminPort),
				"STRAND_S3_MEMORY_BUFFER_MIB":         fmt.Sprint(s.cfg.MemoryBufferMiB),
				"STRAND_S3_EXPRESS_MEMORY_BUFFER_MIB": fmt.Sprint(s.cfg.ExpressMemoryBufferMiB),
				"STRAND_S3_CHAIN_BACKLOG_MIB":         fmt.Sprint(BacklogMiB(s.cfg)),
				"STRAND_WINDOW_CACHE_MIB":             fmt.Sprint(s.cfg.WindowCacheMiB),
				"STRAND_DEDUPE_MAX_PRODUCERS":         fmt.Sprint(s.cfg.DedupeMaxProducers),
			}
			for k, v := range fixed {
				if env[k] != v {
					t.Errorf("%s: %s=%v, want %q", star, k, env[k], v)
				}
			}
			// The resources are the stack's own.
			for k, res := range map[string]string{
				"STRAND_TABLE": "MetastoreTable", "STRAND_STANDARD_BUCKET": "StorageChain", "STRAND_SETTLED_BUCKET": "StorageSettled",
				"STRAND_RELEASE_QUEUE_URL": "SettlementRelease", "STRAND_FENCE_QUEUE_URL": "SettlementFence",
			} {
				if !strings.Contains(js(env[k]), res) {
					t.Errorf("%s: %s=%s does not name %s", star, k, js(env[k]), res)
				}
			}
			for j := range 3 {
				if !strings.Contains(js(env["STRAND_EXPRESS_BUCKETS"]), fmt.Sprintf("StorageExpress%d", j)) {
					t.Errorf("%s: STRAND_EXPRESS_BUCKETS=%s lacks directory bucket %d", star, js(env["STRAND_EXPRESS_BUCKETS"]), j)
				}
			}
			// Peers: every other star on its own listener, never itself.
			peers := js(env["STRAND_PEERS"])
			if s.cfg.StarCount == 1 && env["STRAND_PEERS"] != nil {
				t.Errorf("%s: peers %s with one star", star, peers)
			}
			for j := range s.cfg.StarCount {
				want := fmt.Sprintf("%s=%s://", StarID(j), APIScheme(s.cfg))
				port := fmt.Sprintf(":%d", StarListenerPort(j))
				if j == i {
					if strings.Contains(peers, want) {
						t.Errorf("%s: peers %s name the star itself", star, peers)
					}
					continue
				}
				if !strings.Contains(peers, want) || !strings.Contains(peers, port) {
					t.Errorf("%s: peers %s lack %s...%s", star, peers, want, port)
				}
			}
			switch {
			case s.cfg.StarCount == 1:
			case s.cfg.TLS():
				// The certificate covers the host name, not the
				// load balancer's own name.
				if !strings.Contains(peers, "https://"+s.cfg.APIHostname+":") || strings.Contains(peers, "DNSName") {
					t.Errorf("%s: peers %s, want https://%s:<port>", star, peers, s.cfg.APIHostname)
				}
			case !strings.Contains(peers, "http://") || !strings.Contains(peers, "DNSName"):
				t.Errorf("%s: peers %s are not reached through the load balancer", star, peers)
			}
			// Every variable is a flag of the binary.
			for k := range env {
				if k == "GOMEMLIMIT" {
					continue // the Go runtime's, not a flag: TestStarMemory
				}
				flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "STRAND_"), "_", "-"))
				if !strings.HasPrefix(k, "STRAND_") || !slices.Contains(starFlags(t), flag) {
					t.Errorf("%s: %s is not a flag of functions/star (--%s)", star, k, flag)
				}
			}
		}
	}
}

var (
	starFlagsOnce sync.Once
	starFlagList  []string
	starFlagsErr  error
)

// starFlags lists the flags of functions/star from its --help output.
func starFlags(t *testing.T) []string {
	t.Helper()
	starFlagsOnce.Do(func() {
		bin := filepath.Join(t.TempDir(), "star")
		build := exec.Command("go", "build", "-o", bin, "./functions/star")
		build.Dir = repoRoot
		if out, err := build.CombinedOutput(); err != nil {
			starFlagsErr = fmt.Errorf("go build ./functions/star: %v\n%s", err, out)
			return
		}
		out, _ := exec.Command(bin, "--help").CombinedOutput() // exits 0 or 2 by flag package version
		for _, line := range strings.Split(string(out), "\n") {
			if f, ok := strings.CutPrefix(strings.TrimSpace(line), "-"); ok {
				starFlagList = append(starFlagList, strings.Fields(f)[0])
			}
		}
		if len(starFlagList) < 10 {
			starFlagsErr = fmt.Errorf("functions/star --help lists %d flags:\n%s", len(starFlagList), out)
		}
	})
	if starFlagsErr != nil {
		t.Fatal(starFlagsErr)
	}
	return starFlagList
}

// TestStarImage: the image is built from functions/star/Dockerfile (the
// infra fallback is gone), whose ENTRYPOINT is the star binary.
func TestStarImage(t *testing.T) {
	s := defaults(t)
	b, err := os.ReadFile(filepath.Join(repoRoot, StarDockerfile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `ENTRYPOINT ["/star"]`) {
		t.Errorf("%s: ENTRYPOINT is not the star binary", StarDockerfile)
	}
	if _, err := os.Stat(filepath.Join(repoRoot, "infra", "star.Dockerfile")); err == nil {
		t.Errorf("infra/star.Dockerfile is back; the star image has one Dockerfile, %s", StarDockerfile)
	}
	raw, err := os.ReadFile(filepath.Join(s.outdir, "Strand.assets.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		DockerImages map[string]struct {
			Source struct {
				Directory, DockerFile string
				Platform              string
			}
		}
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest.DockerImages) != 1 {
		t.Fatalf("%d image assets, want the star's", len(manifest.DockerImages))
	}
	for _, img := range manifest.DockerImages {
		if img.Source.DockerFile != StarDockerfile || img.Source.Platform != "linux/arm64" {
			t.Errorf("image asset: %+v, want %s for linux/arm64", img.Source, StarDockerfile)
		}
	}
}

// relayIngress counts the task security group's ingress rules on the API
// port from itself: how a standby reaches its leader.
func relayIngress(s *synthesized) int {
	n := 0
	for _, r := range s.ofType("AWS::EC2::SecurityGroupIngress") {
		p := props(r)
		src, _ := p["SourceSecurityGroupId"].(map[string]any)
		if p["FromPort"] == float64(APIPort) && src != nil && js(src) == js(p["GroupId"]) {
			n++
		}
	}
	return n
}

// TestStandbyReachesLeader: with standby tasks, the task security group
// admits itself on the API port (a standby relays to the leader's task).
func TestStandbyReachesLeader(t *testing.T) {
	if n := relayIngress(defaults(t)); n != 1 {
		t.Fatalf("%d ingress rules from the task security group to itself on port %d, want 1", n, APIPort)
	}
}

// TestStarWithoutStandby: strand:standby=false runs one task per star,
// without the lease, and tasks admit no traffic from each other.
func TestStarWithoutStandby(t *testing.T) {
	s := synth(t, "no-standby", map[string]any{CtxStandby: "false"})
	for id, r := range s.ofType("AWS::ECS::Service") {
		if d := props(r)["DesiredCount"]; d != float64(1) {
			t.Errorf("%s: desired %v, want 1", id, d)
		}
	}
	for id, r := range s.ofType("AWS::ECS::TaskDefinition") {
		if env := js(props(r)["ContainerDefinitions"]); !strings.Contains(env, `{"Name":"STRAND_STANDBY","Value":"false"}`) {
			t.Errorf("%s: want STRAND_STANDBY=false in %s", id, env)
		}
	}
	if n := relayIngress(s); n != 0 {
		t.Errorf("%d ingress rules between tasks without standby, want 0", n)
	}
}

func TestStarServices(t *testing.T) {
	s := threeStars(t)
	services := s.ofType("AWS::ECS::Service")
	if len(services) != s.cfg.StarCount {
		t.Fatalf("%d Fargate services, want %d", len(services), s.cfg.StarCount)
	}
	seen := map[string]bool{}
	for id, r := range services {
		p := props(r)
		// A leader and a warm standby (strand:standby, on by default).
		if p["LaunchType"] != "FARGATE" || p["DesiredCount"] != float64(2) {
			t.Errorf("%s: launch %v desired %v, want 2 tasks (leader and standby)", id, p["LaunchType"], p["DesiredCount"])
		}
		// A deployment never has zero star tasks: the tasks it keeps
		// (desired x minimum healthy) are at least one, and it may run
		// one more beside them (desired x maximum) to start the new task
		// first. (It stopped the old task first before: 0 and 100.)
		dc := p["DeploymentConfiguration"].(map[string]any)
		desired, minPct, maxPct := p["DesiredCount"].(float64), dc["MinimumHealthyPercent"].(float64), dc["MaximumPercent"].(float64)
		if kept := math.Floor(desired * minPct / 100); kept < 1 {
			t.Errorf("%s: deployment %v keeps %v of %v tasks: a moment with no star task", id, dc, kept, desired)
		}
		if room := math.Floor(desired * maxPct / 100); room < desired+1 {
			t.Errorf("%s: deployment %v runs at most %v tasks: no room to start the new one before stopping the old", id, dc, room)
		}
		if lbs := p["LoadBalancers"].([]any); len(lbs) != 2 {
			t.Errorf("%s: %d target groups, want its own and the shared one", id, len(lbs))
		}
		seen[fmt.Sprint(p["ServiceName"])] = true
	}
	for i := range s.cfg.StarCount {
		if !seen[StarID(i)] {
			t.Errorf("no service %s", StarID(i))
		}
	}
	ids := map[string]bool{}
	for id, r := range s.ofType("AWS::ECS::TaskDefinition") {
		p := props(r)
		if js(p["RuntimePlatform"]) != `{"CpuArchitecture":"ARM64","OperatingSystemFamily":"LINUX"}` {
			t.Errorf("%s: platform %v", id, p["RuntimePlatform"])
		}
		if p["Memory"] != fmt.Sprint(s.cfg.TaskMemoryMiB) || p["Cpu"] != fmt.Sprint(s.cfg.TaskCPU) {
			t.Errorf("%s: cpu/memory %v/%v", id, p["Cpu"], p["Memory"])
		}
		var star map[string]any
		for _, c := range p["ContainerDefinitions"].([]any) {
			if c.(map[string]any)["Name"] == "star" {
				star = c.(map[string]any)
			}
		}
		if star == nil {
			t.Fatalf("%s: no star container", id)
		}
		standby := ""
		for _, e := range star["Environment"].([]any) {
			switch e.(map[string]any)["Name"] {
			case "STRAND_STAR_ID":
				ids[fmt.Sprint(e.(map[string]any)["Value"])] = true
			case "STRAND_STANDBY":
				standby = fmt.Sprint(e.(map[string]any)["Value"])
			}
		}
		if standby != "true" {
			t.Errorf("%s: STRAND_STANDBY %q, want true: two tasks without the lease would depose each other at every start", id, standby)
		}
		if pm := js(star["PortMappings"]); !strings.Contains(pm, `"ContainerPort":4780`) || !strings.Contains(pm, `"ContainerPort":9090`) {
			t.Errorf("%s: ports %s", id, pm)
		}
	}
	if len(ids) != s.cfg.StarCount {
		t.Errorf("star ids %v, want %d distinct", ids, s.cfg.StarCount)
	}
	// NLB: TCP listeners (HTTP/2 passes through), health on the admin port.
	for id, r := range s.ofType("AWS::ElasticLoadBalancingV2::TargetGroup") {
		p := props(r)
		if p["Protocol"] != "TCP" || p["Port"] != float64(APIPort) || p["HealthCheckPort"] != "9090" || p["HealthCheckPath"] != "/healthz" {
			t.Errorf("%s: %v", id, p)
		}
	}
	assert(t, "load balancer", func() {
		s.tmpl.HasResourceProperties(jsii.String("AWS::ElasticLoadBalancingV2::LoadBalancer"), map[string]any{
			"Type": "network", "Scheme": "internet-facing",
		})
	})
	assert(t, "internal by default", func() {
		defaults(t).tmpl.HasResourceProperties(jsii.String("AWS::ElasticLoadBalancingV2::LoadBalancer"), map[string]any{
			"Type": "network", "Scheme": "internal",
		})
	})
	// Gateway endpoints for S3, S3 Express and DynamoDB.
	var endpoints []string
	for _, r := range s.ofType("AWS::EC2::VPCEndpoint") {
		p := props(r)
		if p["VpcEndpointType"] != "Gateway" {
			t.Errorf("endpoint %v is not a gateway", p["ServiceName"])
		}
		endpoints = append(endpoints, js(p["ServiceName"]))
	}
	for _, svc := range []string{".s3\"", ".s3express\"", ".dynamodb\""} {
		if !slices.ContainsFunc(endpoints, func(e string) bool { return strings.Contains(e, svc) }) {
			t.Errorf("no %s gateway endpoint in %v", svc, endpoints)
		}
	}
}

func TestAlarms(t *testing.T) {
	s := defaults(t)
	alarms := s.ofType("AWS::CloudWatch::Alarm")
	metrics := map[string][]map[string]any{}
	for id, r := range alarms {
		p := props(r)
		if len(anyStrings(p["AlarmActions"])) == 0 {
			t.Errorf("%s notifies nobody", id)
		}
		metrics[fmt.Sprint(p["MetricName"])] = append(metrics[fmt.Sprint(p["MetricName"])], p)
	}
	// Backlog age, never rate.
	if len(metrics["ApproximateAgeOfOldestMessage"]) != 2 {
		t.Errorf("queue age alarms: %d, want release and fence", len(metrics["ApproximateAgeOfOldestMessage"]))
	}
	for _, rate := range []string{"NumberOfMessagesSent", "NumberOfMessagesReceived", "ApproximateNumberOfMessagesNotVisible"} {
		if metrics[rate] != nil {
			t.Errorf("alarm on a rate metric %s", rate)
		}
	}
	if got := len(metrics[MetricBacklogAge]); got != s.cfg.StarCount {
		t.Errorf("star backlog age alarms: %d", got)
	}
	// Stalls: one alarm per cause, on the cause dimension.
	causes := map[string]bool{}
	for _, p := range metrics[MetricStalls] {
		if p["Namespace"] != MetricsNamespace {
			t.Errorf("stall alarm namespace %v", p["Namespace"])
		}
		for _, d := range p["Dimensions"].([]any) {
			if d.(map[string]any)["Name"] == "cause" {
				causes[fmt.Sprint(d.(map[string]any)["Value"])] = true
			}
		}
	}
	for _, c := range StallCauses {
		if !causes[c] {
			t.Errorf("no stall alarm for cause %s", c)
		}
	}
	// DLQ depth on both DLQs.
	dlqAlarms := 0
	for _, p := range metrics["ApproximateNumberOfMessagesVisible"] {
		if strings.Contains(js(p["Dimensions"]), "DLQ") && p["Threshold"] == float64(0) && p["ComparisonOperator"] == "GreaterThanThreshold" {
			dlqAlarms++
		}
	}
	if dlqAlarms != 2 {
		t.Errorf("DLQ depth alarms: %d", dlqAlarms)
	}
	// Errors of every function.
	fnAlarms := map[string]bool{}
	for _, p := range metrics["Errors"] {
		if p["Namespace"] == "AWS/Lambda" {
			fnAlarms[js(p["Dimensions"])] = true
		}
	}
	for id := range s.ofType("AWS::Lambda::Function") {
		if !slices.ContainsFunc(keys(fnAlarms), func(d string) bool { return strings.Contains(d, `"Ref":"`+id+`"`) }) {
			t.Errorf("no error alarm for %s", id)
		}
	}
	for id, r := range s.ofType("AWS::CloudWatch::Dashboard") {
		body := js(props(r)["DashboardBody"])
		for _, want := range []string{"Backlog age", "Stalls by cause", "DLQ depth", "Lambda errors"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: dashboard lacks %q", id, want)
			}
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestBacklogMiBFitsTheTask: the flight index's byte budget is what the
// task's memory leaves after the pools and the overhead, split between the
// two classes, never below the minimum.
func TestBacklogMiBFitsTheTask(t *testing.T) {
	c := Config{TaskMemoryMiB: 2048, MemoryBufferMiB: 256, ExpressMemoryBufferMiB: 32}
	if got, want := BacklogMiB(c), (2048-AgentMemoryMiB-256-32-StarOverheadMiB)/2; got != want {
		t.Fatalf("BacklogMiB = %d, want %d", got, want)
	}
	if got := BacklogMiB(Config{TaskMemoryMiB: 1024, MemoryBufferMiB: 400, ExpressMemoryBufferMiB: 100}); got != MinBacklogMiB {
		t.Fatalf("a tight task gets %d MiB, want the minimum %d", got, MinBacklogMiB)
	}
	if c.TaskMemoryMiB < AgentMemoryMiB+c.MemoryBufferMiB+c.ExpressMemoryBufferMiB+StarOverheadMiB+2*BacklogMiB(c) {
		t.Fatal("the agent, pools, overhead and two backlogs exceed the task")
	}
}

// TestPassIndexSwitch: strand:passIndex is one switch for the whole stack:
// every star's container and every Lambda get the same STRAND_PASS_INDEX
// ("true" by default, "false" with strand:passIndex=false), and only with it do the
// roles reach the index/ and packs/ prefixes of the settled bucket (absorb
// writes pass indexes, settle runs and packs, trim deletes both, the rest
// read).
func TestPassIndexSwitch(t *testing.T) {
	off := synth(t, "refsmode", map[string]any{CtxPassIndex: "false", CtxStarCount: float64(2)})
	for _, tc := range []struct {
		s    *synthesized
		want string
	}{{off, "false"}, {defaults(t), "true"}} {
		if tc.s.cfg.PassIndex != (tc.want == "true") {
			t.Fatalf("config PassIndex %v, want %s", tc.s.cfg.PassIndex, tc.want)
		}
		envs := starEnv(t, tc.s)
		if len(envs) != tc.s.cfg.StarCount {
			t.Fatalf("%d star environments, want %d", len(envs), tc.s.cfg.StarCount)
		}
		for star, env := range envs {
			if env[EnvPassIndex] != tc.want {
				t.Errorf("%s: %s=%v, want %q", star, EnvPassIndex, env[EnvPassIndex], tc.want)
			}
		}
		fns := tc.s.ofType("AWS::Lambda::Function")
		if len(fns) != len(FunctionNames) {
			t.Fatalf("%d functions, want %d", len(fns), len(FunctionNames))
		}
		for id, r := range fns {
			if env := js(props(r)["Environment"]); !strings.Contains(env, `"`+EnvPassIndex+`":"`+tc.want+`"`) {
				t.Errorf("%s: %s is not %q: %s", id, EnvPassIndex, tc.want, env)
			}
		}
		on := func(role, action, prefix string) bool {
			for _, r := range grants(t, tc.s, role)[action] {
				if strings.Contains(r, "/"+prefix+"*") {
					return true
				}
			}
			return false
		}
		want := tc.want == "true"
		for _, g := range []struct{ role, action, prefix string }{
			{"SettlementAbsorbRole", "s3:PutObject", IndexPrefix}, {"SettlementAbsorbRole", "s3:GetObject", IndexPrefix},
			{"SettlementSettleRole", "s3:GetObject", IndexPrefix}, {"SettlementSettleRole", "s3:PutObject", IndexPrefix},
			{"SettlementSettleRole", "s3:GetObject", PacksPrefix}, {"SettlementSettleRole", "s3:PutObject", PacksPrefix},
			{"SettlementTrimRole", "s3:DeleteObject", IndexPrefix}, {"SettlementTrimRole", "s3:DeleteObject", PacksPrefix},
			{"SettlementTrimRole", "s3:GetObject", IndexPrefix},
			{"SettlementProbeRole", "s3:GetObject", IndexPrefix},
			{"StarTaskRole", "s3:GetObject", IndexPrefix}, {"StarTaskRole", "s3:GetObject", PacksPrefix},
		} {
			if on(g.role, g.action, g.prefix) != want {
				t.Errorf("pass index %s: %s %s on %s*: %v, want %v", tc.want, g.role, g.action, g.prefix, !want, want)
			}
		}
		// Only the absorb (pass indexes) and settle (runs, packs) write
		// there, only trim deletes, and packs are none of the probe's or
		// the absorb's business.
		for _, prefix := range []string{IndexPrefix, PacksPrefix} {
			for _, role := range []string{"SettlementTrimRole", "SettlementProbeRole", "StarTaskRole"} {
				if on(role, "s3:PutObject", prefix) {
					t.Errorf("%s may put under %s", role, prefix)
				}
			}
			for _, role := range []string{"SettlementAbsorbRole", "SettlementSettleRole", "SettlementProbeRole", "StarTaskRole"} {
				if on(role, "s3:DeleteObject", prefix) {
					t.Errorf("%s may delete under %s", role, prefix)
				}
			}
		}
		for _, role := range []string{"SettlementAbsorbRole", "SettlementProbeRole"} {
			if on(role, "s3:GetObject", PacksPrefix) || on(role, "s3:PutObject", PacksPrefix) {
				t.Errorf("%s may reach %s", role, PacksPrefix)
			}
		}
		// Settle sweeps every minute on the pass index (its unsettled
		// passes are the readers' window), every 5 minutes on refs.
		wantRate := map[string]string{"false": "rate(5 minutes)", "true": "rate(1 minute)"}[tc.want]
		found := false
		for id, r := range tc.s.ofType("AWS::Events::Rule") {
			if !strings.HasPrefix(id, "SettlementSettleSweep") {
				continue
			}
			found = true
			if got := fmt.Sprint(props(r)["ScheduleExpression"]); got != wantRate {
				t.Errorf("pass index %s: settle sweep %s, want %s", tc.want, got, wantRate)
			}
		}
		if !found {
			t.Errorf("no settle sweep rule among %d rules", len(tc.s.ofType("AWS::Events::Rule")))
		}
	}
}

// TestGetImpliesList: every role that may GET objects of a Standard
// bucket may also list it. Without s3:ListBucket, S3 answers a GET of a
// missing key with 403 AccessDenied instead of 404, which objstore cannot
// tell from a denied read (no ErrNotFound): the absorb's probe for a
// chain indexed before Head.Indexed existed (passindex.Window.first)
// GETs a pass index that a refs chain does not have, so on AWS every pass
// of an existing chain switching to the pass index failed with
// AccessDenied and the chain stalled (the absorb had GetObject on index/
// without ListBucket).
func TestGetImpliesList(t *testing.T) {
	for _, s := range []*synthesized{defaults(t), synth(t, "refsmode", map[string]any{CtxPassIndex: "false", CtxStarCount: float64(2)})} {
		buckets := s.ofType("AWS::S3::Bucket")
		for _, role := range []string{"SettlementAbsorbRole", "SettlementSettleRole", "SettlementTrimRole", "SettlementProbeRole", "StarTaskRole"} {
			g := grants(t, s, role)
			for b := range buckets {
				gets, lists := false, false
				for _, r := range g["s3:GetObject"] {
					gets = gets || strings.Contains(r, `"`+b+`"`)
				}
				for _, r := range g["s3:ListBucket"] {
					lists = lists || strings.Contains(r, `"`+b+`"`)
				}
				if gets && !lists {
					t.Errorf("pass index %v: %s may GET objects of %s but not list it: a missing key reads as 403, not 404", s.cfg.PassIndex, role, b)
				}
			}
		}
	}
}
