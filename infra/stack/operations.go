package stack

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// StallCauses are the diagnosed causes a star reports with each budget
// stall (seed/write-path.md; shared/star's Stall* constants): one alarm each.
var StallCauses = []string{"absorb_lagging", "metastore_slow", "epoch_settling"}

// Star metrics the alarms read. The star exports them in Prometheus form on
// its admin port (shared/star); the CloudWatch agent sidecar scrapes them and
// publishes them under MetricsNamespace with the dimensions below (see
// agentConfig in star.go).
const (
	// MetricBacklogAge: age in seconds of the oldest released, unabsorbed
	// flight (gauge); dimension star (maximum over classes).
	MetricBacklogAge = "strand_backlog_age_seconds"
	// MetricStalls: publishes blocked at the backlog budget (counter,
	// published as deltas); dimension cause (sum over stars and classes).
	MetricStalls = "strand_backlog_stalls_total"
)

// Alarm thresholds. Backlog is alerted on age, never on rate.
const (
	releaseAgeAlarmSeconds = 300
	fenceAgeAlarmSeconds   = 3600
	starBacklogAlarmSecs   = 120
)

// TaskStartSeconds bounds how long Fargate takes from a deployment's new
// task being placed to its first CPU sample (image pull and start; 1 to 3
// minutes observed).
const TaskStartSeconds = 180

// NotRunningMinutes is the star-not-running alarm's window, in one-minute
// periods: longer than the gap a task's replacement can leave in the
// service's CPU samples (a stop, up to DrainBudgetSeconds+StopMarginSeconds,
// then TaskStartSeconds for the new task), plus a minute for the periods'
// boundaries, so neither a deploy (which starts the new task first and so
// leaves no gap) nor a rollback or a single crash's restart pages.
const NotRunningMinutes = (DrainBudgetSeconds+StopMarginSeconds+TaskStartSeconds+59)/60 + 1

// MetricRunningTasks is Container Insights' count of a service's running
// tasks (namespace ECS/ContainerInsights, dimensions ClusterName and
// ServiceName), which the no-standby alarm reads.
const MetricRunningTasks = "RunningTaskCount"

// noStandbyMetric is the metric of star i's no-standby alarm, its
// service's running tasks (the minimum in each minute), or nil when there
// is no standby to miss or no Container Insights to count the tasks
// (docs/adr/0067). A deploy does not lower it: ECS starts the new tasks
// before it stops the old ones (minimum healthy 100 %); the replacement of
// a task that died does, for up to a stop and a start, which the alarm's
// window (NotRunningMinutes, every minute below) outlasts. Missing data is
// not breaching: with no task at all the star-not-running alarm fires.
func noStandbyMetric(cfg Config, star *Star, i int) awscloudwatch.IMetric {
	if !cfg.Standby || !cfg.ContainerInsights {
		return nil
	}
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String("ECS/ContainerInsights"), MetricName: jsii.String(MetricRunningTasks),
		DimensionsMap: &map[string]*string{"ClusterName": star.Cluster.ClusterName(), "ServiceName": star.Services[i].ServiceName()},
		Period:        awscdk.Duration_Minutes(jsii.Number(1)), Statistic: jsii.String("Minimum"),
	})
}

// Operations holds the alarms, their topic and the dashboard.
type Operations struct {
	constructs.Construct
	Topic     awssns.Topic
	Alarms    []awscloudwatch.Alarm
	Dashboard awscloudwatch.Dashboard
}

// NewOperations creates alarms on backlog age (SQS and the stars' own),
// stalls by cause, DLQ depth, Lambda errors, stars not running and stars
// without their standby, all notifying one SNS topic, and a dashboard of
// the same signals.
func NewOperations(scope constructs.Construct, id string, cfg Config, se *Settlement, star *Star) *Operations {
	o := &Operations{Construct: constructs.NewConstruct(scope, jsii.String(id))}
	o.Topic = awssns.NewTopic(o.Construct, jsii.String("Alarms"), &awssns.TopicProps{EnforceSSL: jsii.Bool(true)})
	// EnforceSSL writes a topic policy (deny publishes without TLS) that
	// replaces SNS's default policy, which is what let the account's
	// CloudWatch alarms publish. Allow CloudWatch again, for alarms of
	// this account only (confused deputy: aws:SourceAccount).
	o.Topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("AllowCloudWatchAlarms"),
		Effect:     awsiam.Effect_ALLOW,
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  jsii.Strings(*o.Topic.TopicArn()),
		Conditions: &map[string]any{
			"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()},
			"ArnLike": map[string]any{"aws:SourceArn": awscdk.Fn_Join(jsii.String(""), &[]*string{
				jsii.String("arn:"), awscdk.Aws_PARTITION(), jsii.String(":cloudwatch:"), awscdk.Aws_REGION(),
				jsii.String(":"), awscdk.Aws_ACCOUNT_ID(), jsii.String(":alarm:*"),
			})},
		},
	}))
	if cfg.AlarmEmail != "" {
		o.Topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(cfg.AlarmEmail), nil))
	}
	action := awscloudwatchactions.NewSnsAction(o.Topic)
	stackName := *awscdk.Stack_Of(o.Construct).StackName()
	alarm := func(id, desc string, m awscloudwatch.IMetric, threshold float64, op awscloudwatch.ComparisonOperator, periods int, missing awscloudwatch.TreatMissingData) awscloudwatch.Alarm {
		a := awscloudwatch.NewAlarm(o.Construct, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          jsii.String(stackName + "-" + id),
			AlarmDescription:   jsii.String(desc),
			Metric:             m,
			Threshold:          jsii.Number(threshold),
			ComparisonOperator: op,
			EvaluationPeriods:  jsii.Number(periods),
			DatapointsToAlarm:  jsii.Number(periods),
			TreatMissingData:   missing,
		})
		a.AddAlarmAction(action)
		a.AddOkAction(action)
		o.Alarms = append(o.Alarms, a)
		return a
	}
	gt := awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD
	ge := awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD
	notBreaching := awscloudwatch.TreatMissingData_NOT_BREACHING
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	five := awscdk.Duration_Minutes(jsii.Number(5))

	// Backlog age: the oldest release event nobody absorbed, the oldest
	// fence event nobody probed, and each star's own oldest unabsorbed
	// flight (the budget that stalls producers).
	releaseAge := se.ReleaseQueue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")})
	alarm("ReleaseBacklogAge", fmt.Sprintf("Oldest release event older than %ds: absorb is not keeping up (backlog age, not rate)", releaseAgeAlarmSeconds),
		releaseAge, releaseAgeAlarmSeconds, gt, 3, notBreaching)
	fenceAge := se.FenceQueue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Maximum")})
	alarm("FenceBacklogAge", fmt.Sprintf("Oldest fence event older than %ds: probe is not collecting garbage", fenceAgeAlarmSeconds),
		fenceAge, fenceAgeAlarmSeconds, gt, 1, notBreaching)
	var starBacklog, stalls, running []awscloudwatch.IMetric
	for i := range cfg.StarCount {
		m := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(MetricsNamespace), MetricName: jsii.String(MetricBacklogAge),
			DimensionsMap: &map[string]*string{"star": jsii.String(StarID(i))},
			Period:        minute, Statistic: jsii.String("Maximum"),
		})
		starBacklog = append(starBacklog, m)
		alarm(fmt.Sprintf("Star%dBacklogAge", i), fmt.Sprintf("%s: oldest unabsorbed flight older than %ds", StarID(i), starBacklogAlarmSecs),
			m, starBacklogAlarmSecs, gt, 3, notBreaching)
		cpu := star.Services[i].MetricCpuUtilization(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("SampleCount")})
		alarm(fmt.Sprintf("Star%dNotRunning", i), fmt.Sprintf("%s: no running task reported CPU for %d minutes (longer than a deploy's stop and start)", StarID(i), NotRunningMinutes),
			cpu, 1, awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD, NotRunningMinutes, awscloudwatch.TreatMissingData_BREACHING)
		if m := noStandbyMetric(cfg, star, i); m != nil {
			running = append(running, m)
			alarm(fmt.Sprintf("Star%dNoStandby", i), fmt.Sprintf("%s: fewer than %d tasks running for %d minutes: no warm standby, a crash of the leader would leave the star dark until ECS starts a task (longer than a task's replacement; a deploy starts the new tasks first)", StarID(i), cfg.StarTasks(), NotRunningMinutes),
				m, float64(cfg.StarTasks()), awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD, NotRunningMinutes, notBreaching)
		}
	}
	if cfg.Standby && !cfg.ContainerInsights {
		awscdk.Annotations_Of(o.Construct).AddWarningV2(jsii.String("strand:noStandbyAlarm"), jsii.String(
			"strand:standby without strand:containerInsights: no alarm tells of a star whose standby is missing (the Star<i>NoStandby alarms read Container Insights' RunningTaskCount)"), nil)
	}
	// Stalls by cause: any budget stall is abnormal and names its cause.
	for _, cause := range StallCauses {
		m := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(MetricsNamespace), MetricName: jsii.String(MetricStalls),
			DimensionsMap: &map[string]*string{"cause": jsii.String(cause)},
			Period:        five, Statistic: jsii.String("Sum"),
		})
		stalls = append(stalls, m)
		alarm("Stall-"+cause, "Producers stalled at the backlog budget, cause "+cause, m, 1, ge, 1, notBreaching)
	}
	// DLQ depth: a message there is an event the functions gave up on.
	var dlqs []awscloudwatch.IMetric
	for _, q := range []struct {
		id  string
		dlq awssqs.Queue
	}{{"ReleaseDLQDepth", se.ReleaseDLQ}, {"FenceDLQDepth", se.FenceDLQ}} {
		m := q.dlq.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")})
		dlqs = append(dlqs, m)
		alarm(q.id, "Messages in a dead-letter queue: inspect and redrive", m, 0, gt, 1, notBreaching)
	}
	// Lambda errors.
	var errs, durations []awscloudwatch.IMetric
	for _, name := range FunctionNames {
		fn := se.Functions[name]
		m := fn.MetricErrors(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")})
		errs = append(errs, m)
		durations = append(durations, fn.MetricDuration(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("p99")}))
		alarm("LambdaErrors-"+name, "The "+name+" Lambda is failing", m, 1, ge, 2, notBreaching)
	}

	o.Dashboard = awscloudwatch.NewDashboard(o.Construct, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(stackName),
	})
	graph := func(title string, left []awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &left, Width: jsii.Number(12), Height: jsii.Number(6),
		})
	}
	var cpu, mem []awscloudwatch.IMetric
	for _, svc := range star.Services {
		cpu = append(cpu, svc.MetricCpuUtilization(nil))
		mem = append(mem, svc.MetricMemoryUtilization(nil))
	}
	o.Dashboard.AddWidgets(
		graph("Backlog age: release queue (s)", []awscloudwatch.IMetric{releaseAge}),
		graph("Backlog age: stars (s)", starBacklog),
	)
	o.Dashboard.AddWidgets(graph("Stalls by cause", stalls), graph("DLQ depth", dlqs))
	o.Dashboard.AddWidgets(graph("Lambda errors", errs), graph("Lambda duration p99", durations))
	o.Dashboard.AddWidgets(graph("Star CPU %", cpu), graph("Star memory %", mem))
	if len(running) > 0 {
		o.Dashboard.AddWidgets(graph("Star tasks running (leader and standby)", running))
	}
	o.Dashboard.AddWidgets(awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
		Title: jsii.String("Alarms"), Alarms: alarmRefs(o.Alarms), Width: jsii.Number(24),
	}))
	return o
}

func alarmRefs(as []awscloudwatch.Alarm) *[]interfacesawscloudwatch.IAlarmRef {
	out := make([]interfacesawscloudwatch.IAlarmRef, len(as))
	for i, a := range as {
		out[i] = a
	}
	return &out
}
