package stack

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/strandlog/strand/infra/bundle"
)

// FunctionNames are the settlement Lambdas, each built from functions/<name>.
var FunctionNames = []string{"absorb", "settle", "trim", "probe"}

// fnSpec sizes one Lambda and its sweep schedule (plain numbers: no jsii
// values may be created at package initialisation).
type fnSpec struct {
	memoryMiB    int
	timeoutSecs  int
	sweepMinutes int
}

var fnSpecs = map[string]fnSpec{
	"absorb": {memoryMiB: 512, timeoutSecs: 60, sweepMinutes: 1},
	"settle": {memoryMiB: 1024, timeoutSecs: 300, sweepMinutes: 5},
	"trim":   {memoryMiB: 256, timeoutSecs: 300, sweepMinutes: 15},
	"probe":  {memoryMiB: 256, timeoutSecs: 300, sweepMinutes: 60},
}

// fnMemoryMiB is name's memory: its spec's, except settle's with the pass
// index (Config.SettleMemoryMiB: a step holds the live runs).
func fnMemoryMiB(cfg Config, name string) int {
	if name == "settle" && cfg.PassIndex {
		return cfg.SettleMemoryMiB
	}
	return fnSpecs[name].memoryMiB
}

// EnvWindowCacheMiB is the pass index window cache's budget of the star
// (--window-cache-mib) and of the settle, trim and probe Lambdas.
const EnvWindowCacheMiB = "STRAND_WINDOW_CACHE_MIB"

// fnWindowMiB is name's window cache budget: a quarter of its memory
// (trim and probe, 256 MiB: 64 MiB, passindex.DefaultWindowCacheBytes), half
// of settle's (a step pins the live runs it walks whatever the budget;
// the cache keeps them for the next step of a warm Lambda).
func fnWindowMiB(cfg Config, name string) int {
	if name == "settle" {
		return fnMemoryMiB(cfg, name) / 2
	}
	return fnMemoryMiB(cfg, name) / 4
}

// sweepMinutes is how often name's sweep runs. With the pass index,
// settle runs every minute (as node.DefaultPassIndexSettleEvery does):
// the passes it has not settled yet are the window every reader caches
// and searches (about 4 a second), and each step writes one run, so the
// period bounds both (design 014, "Level 1 as built").
func sweepMinutes(cfg Config, name string) int {
	if name == "settle" && cfg.PassIndex {
		return 1
	}
	return fnSpecs[name].sweepMinutes
}

// QueueRetentionDays is how long every queue (and DLQ) keeps a message:
// SQS's maximum.
const QueueRetentionDays = 14

// maxReceives is how often a message is retried before its DLQ takes it.
const maxReceives = 5

// Settlement is the event-driven back end: the release queue (FIFO, one
// message group per chain) feeding absorb, the fence-event queue feeding
// probe, a dead-letter queue for each, the four Lambdas and their sweeps.
type Settlement struct {
	constructs.Construct
	ReleaseQueue    awssqs.Queue
	ReleaseDLQ      awssqs.Queue
	FenceQueue      awssqs.Queue
	FenceDLQ        awssqs.Queue
	Functions       map[string]awslambda.Function
	Roles           map[string]awsiam.Role
	EventSourceMaps map[string]awslambdaeventsources.SqsEventSource
}

// EnvExpressSessionMode is shared/objstore/s3obj's variable for the S3
// Express session mode its client asks CreateSession for.
const EnvExpressSessionMode = "STRAND_S3EXPRESS_SESSION_MODE"

// EnvPassIndex is the pass index switch (design 014) of the star
// (--pass-index) and of every Lambda (absorb, settle, trim, probe read it
// with their configuration): one value for the whole stack,
// Config.PassIndex, "true" or "false", always set.
const EnvPassIndex = "STRAND_PASS_INDEX"

// fnGoMemLimitMiB is name's GOMEMLIMIT: 90% of its memory, as the star's
// (GoMemLimitMiB), so that the collector works harder before the Lambda
// reaches its limit instead of letting garbage count toward it (a settle
// step's transient heap: docs/operations.md, settle sizing).
func fnGoMemLimitMiB(cfg Config, name string) int { return fnMemoryMiB(cfg, name) * 9 / 10 }

// fnSized is env plus name's GOMEMLIMIT and, for settle, trim and probe
// with the pass index, its window cache budget.
func fnSized(env map[string]*string, cfg Config, name string) map[string]*string {
	out := make(map[string]*string, len(env)+2)
	for k, v := range env {
		out[k] = v
	}
	out["GOMEMLIMIT"] = jsii.String(fmt.Sprintf("%dMiB", fnGoMemLimitMiB(cfg, name)))
	if cfg.PassIndex && name != "absorb" {
		out[EnvWindowCacheMiB] = jsii.String(strconv.Itoa(fnWindowMiB(cfg, name)))
	}
	return out
}

// fnEnv is a function's environment: the shared one, plus ReadOnly Express
// sessions when its role may only create those (the SDK's default provider
// asks for ReadWrite, which that role is refused).
func fnEnv(shared map[string]*string, a *access) *map[string]*string {
	env := make(map[string]*string, len(shared)+1)
	for k, v := range shared {
		env[k] = v
	}
	if a.readOnlyExpress {
		env[EnvExpressSessionMode] = jsii.String("ReadOnly")
	}
	return &env
}

// NewSettlement creates queues, Lambdas, triggers, schedules and the
// functions' least-privilege roles.
func NewSettlement(scope constructs.Construct, id string, cfg Config, repoRoot string, st *Storage, ms *Metastore) (*Settlement, error) {
	s := &Settlement{
		Construct:       constructs.NewConstruct(scope, jsii.String(id)),
		Functions:       map[string]awslambda.Function{},
		Roles:           map[string]awsiam.Role{},
		EventSourceMaps: map[string]awslambdaeventsources.SqsEventSource{},
	}
	// Every queue keeps a message for SQS's maximum, 14 days.
	retention := awscdk.Duration_Days(jsii.Number(QueueRetentionDays))
	s.ReleaseDLQ = awssqs.NewQueue(s.Construct, jsii.String("ReleaseDLQ"), &awssqs.QueueProps{
		Fifo:            jsii.Bool(true),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: retention,
	})
	s.ReleaseQueue = awssqs.NewQueue(s.Construct, jsii.String("Release"), &awssqs.QueueProps{
		Fifo: jsii.Bool(true),
		// Release events are unique per (chain, head); content dedup makes a
		// re-sent identical event harmless even without a dedup id.
		ContentBasedDeduplication: jsii.Bool(true),
		Encryption:                awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:                jsii.Bool(true),
		// As long as its DLQ keeps a message: an absorb outage longer than
		// SQS's 4-day default must not lose release events.
		RetentionPeriod: retention,
		// AWS recommends six times the consumer's timeout.
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(6 * fnSpecs["absorb"].timeoutSecs)),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: s.ReleaseDLQ, MaxReceiveCount: jsii.Number(maxReceives)},
	})
	s.FenceDLQ = awssqs.NewQueue(s.Construct, jsii.String("FenceDLQ"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: retention,
	})
	s.FenceQueue = awssqs.NewQueue(s.Construct, jsii.String("Fence"), &awssqs.QueueProps{
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		RetentionPeriod:   retention,
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(6 * fnSpecs["probe"].timeoutSecs)),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: s.FenceDLQ, MaxReceiveCount: jsii.Number(maxReceives)},
	})

	var stars []string
	for i := range cfg.StarCount {
		stars = append(stars, StarID(i))
	}
	env := map[string]*string{
		"STRAND_TABLE":           ms.Table.TableName(),
		"STRAND_EXPRESS_BUCKETS": awscdk.Fn_Join(jsii.String(","), &st.ExpressNames),
		"STRAND_STANDARD_BUCKET": st.Chain.BucketName(),
		"STRAND_SETTLED_BUCKET":  st.Settled.BucketName(),
		"STRAND_STARS":           jsii.String(strings.Join(stars, ",")),
		// The star's write quorum, so every reader of the set agrees.
		"STRAND_EXPRESS_W": jsii.String(strconv.Itoa(ExpressW)),
		// The star's pass index switch, so every stage agrees.
		EnvPassIndex: jsii.String(strconv.FormatBool(cfg.PassIndex)),
	}

	grants := map[string]*access{}
	// absorb: reads slots, writes refs and the checkpoint.
	a := &access{}
	a.expressSession(st, true)
	a.objects(st.Chain.BucketArn(), ChainPrefix, true, "s3:GetObject")
	a.table(ms, tableRead, tableWrite)
	if cfg.PassIndex { // writes each pass's index (If-None-Match) and reads a copy back; probes for an index where the window of a chain without Head.Indexed starts (ListBucket: a missing one must read as 404, not 403)
		a.objects(st.Settled.BucketArn(), IndexPrefix, true, "s3:GetObject", "s3:PutObject")
	}
	grants["absorb"] = a
	// settle: reads slots, writes settled objects, swaps refs, and deletes
	// a settled object once it has been merged into a larger one (the refs
	// point at the larger one by then).
	a = &access{}
	a.expressSession(st, true)
	a.objects(st.Chain.BucketArn(), ChainPrefix, true, "s3:GetObject")
	a.objects(st.Settled.BucketArn(), SettledPrefix, true, "s3:GetObject", "s3:PutObject", "s3:DeleteObject")
	a.table(ms, tableRead, tableWrite)
	if cfg.PassIndex { // settles whole passes by their indexes, writes a run per step (If-None-Match, or adopts the one there) and packs small streams (reads them back when it flushes them)
		a.objects(st.Settled.BucketArn(), IndexPrefix, false, "s3:GetObject", "s3:PutObject")
		a.objects(st.Settled.BucketArn(), PacksPrefix, false, "s3:GetObject", "s3:PutObject")
	}
	grants["settle"] = a
	// trim: deletes settled slots and, on retention or stream deletion,
	// settled objects and refs. Before deleting a copy it reads the copy's
	// envelope (a bounded GET at offset 0) so that it never deletes poison:
	// GetObject on chains (ListBucket to tell a missing copy, 404, from a
	// denied one, 403), and a ReadWrite session on the Express set (reads
	// and deletes).
	a = &access{}
	a.expressSession(st, false)
	a.objects(st.Chain.BucketArn(), ChainPrefix, true, "s3:GetObject", "s3:DeleteObject")
	a.objects(st.Settled.BucketArn(), SettledPrefix, false, "s3:DeleteObject")
	a.table(ms, tableRead, tableWrite)
	if cfg.PassIndex { // lists an epoch's pass indexes and runs and deletes those settled or flushed, then the flushed runs' packs; reads the window before it deletes a stream's metadata
		a.objects(st.Settled.BucketArn(), IndexPrefix, true, "s3:GetObject", "s3:DeleteObject")
		a.objects(st.Settled.BucketArn(), PacksPrefix, true, "s3:DeleteObject")
	}
	grants["trim"] = a
	// probe: reads and deletes garbage copies above a cut; lists settled
	// objects to find those no ref points to, marks them (one small object
	// each under OrphanMarkPrefix) and deletes them once they stayed
	// provably unreferenced for the grace period.
	a = &access{}
	a.expressSession(st, false)
	a.objects(st.Chain.BucketArn(), ChainPrefix, true, "s3:GetObject", "s3:DeleteObject")
	a.objects(st.Settled.BucketArn(), SettledPrefix, true, "s3:GetObject", "s3:DeleteObject")
	a.objects(st.Settled.BucketArn(), OrphanMarkPrefix, false, "s3:GetObject", "s3:PutObject", "s3:DeleteObject")
	a.table(ms, tableRead)
	if cfg.PassIndex { // counts the window's parts as in transit
		a.objects(st.Settled.BucketArn(), IndexPrefix, false, "s3:GetObject")
	}
	grants["probe"] = a

	for _, name := range FunctionNames {
		spec := fnSpecs[name]
		// The asset is the bootstrap built now, from the sources as they
		// are: never a placeholder or a stale binary (package bundle).
		dir, err := bundle.Bootstrap(repoRoot, name)
		if err != nil {
			return nil, err
		}
		title := strings.ToUpper(name[:1]) + name[1:]
		logs := awslogs.NewLogGroup(s.Construct, jsii.String(title+"Logs"), &awslogs.LogGroupProps{
			LogGroupName:  jsii.String("/aws/lambda/" + *awscdk.Stack_Of(s.Construct).StackName() + "-" + name),
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		})
		logs.Node().DefaultChild().(awslogs.CfnLogGroup).SetRetentionInDays(jsii.Number(cfg.RetentionDays))
		role := awsiam.NewRole(s.Construct, jsii.String(title+"Role"), &awsiam.RoleProps{
			AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
			Description: jsii.String("strand " + name + " Lambda: least privilege"),
		})
		// Logging to its own group only (instead of the managed basic
		// execution policy, which allows every log group).
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("logs:CreateLogStream", "logs:PutLogEvents"),
			Resources: jsii.Strings(*logs.LogGroupArn()),
		}))
		grants[name].applyTo(role)
		suppress(role, objectKeys())
		fn := awslambda.NewFunction(s.Construct, jsii.String(title), &awslambda.FunctionProps{
			FunctionName: jsii.String(*awscdk.Stack_Of(s.Construct).StackName() + "-" + name),
			Description:  jsii.String("strand " + name + " (functions/" + name + ")"),
			Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
			Architecture: awslambda.Architecture_ARM_64(),
			Handler:      jsii.String("bootstrap"),
			Code:         awslambda.Code_FromAsset(jsii.String(dir), nil),
			MemorySize:   jsii.Number(fnMemoryMiB(cfg, name)),
			Timeout:      awscdk.Duration_Seconds(jsii.Number(spec.timeoutSecs)),
			Role:         role,
			LogGroup:     logs,
			Environment:  fnEnv(fnSized(env, cfg, name), grants[name]),
			// Sweeps and SQS deliveries are retried by their sources; async
			// invocations (the schedule) get one retry.
			RetryAttempts: jsii.Number(1),
		})
		s.Functions[name] = fn
		s.Roles[name] = role
		rule := awsevents.NewRule(s.Construct, jsii.String(title+"Sweep"), &awsevents.RuleProps{
			Description: jsii.String("strand " + name + " sweep"),
			Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(sweepMinutes(cfg, name)))),
		})
		// No custom input: the function gets the scheduled event itself,
		// whose "detail-type" ("Scheduled Event") is what every handler
		// recognises as a sweep (any other payload is refused).
		rule.AddTarget(awseventstargets.NewLambdaFunction(fn, &awseventstargets.LambdaFunctionProps{}))
	}
	// absorb: woken by each release (one message group per chain, so a
	// chain's releases are absorbed in order and never concurrently).
	s.EventSourceMaps["absorb"] = awslambdaeventsources.NewSqsEventSource(s.ReleaseQueue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
	})
	s.Functions["absorb"].AddEventSource(s.EventSourceMaps["absorb"])
	s.EventSourceMaps["probe"] = awslambdaeventsources.NewSqsEventSource(s.FenceQueue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
	})
	s.Functions["probe"].AddEventSource(s.EventSourceMaps["probe"])
	return s, nil
}
