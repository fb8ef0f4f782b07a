package stack

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecrassets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	elbv2 "github.com/aws/aws-cdk-go/awscdk/v2/awselasticloadbalancingv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/strandlog/strand/infra/bundle"
)

// StarDockerfile is the star's Dockerfile relative to the repository root
// (the build context). Its ENTRYPOINT is the star binary, which takes its
// whole configuration from STRAND_* environment variables (StarEnv).
const StarDockerfile = "functions/star/Dockerfile"

// MetricsNamespace is the CloudWatch namespace of the star's metrics (see
// docs/deploy.md, "Metrics").
const MetricsNamespace = "Strand"

// AgentImage is the CloudWatch agent that scrapes the star's Prometheus
// endpoint and publishes selected series as embedded-metric-format logs.
// Pinned to a release (never latest): a task started tomorrow must run the
// agent that was tested. To upgrade, pick a tag of
// public.ecr.aws/cloudwatch-agent/cloudwatch-agent (one per agent release,
// multi-arch) and deploy.
const AgentImage = "public.ecr.aws/cloudwatch-agent/cloudwatch-agent:" + AgentVersion

// AgentVersion is the pinned CloudWatch agent release.
const AgentVersion = "1.300066.0b1367"

// ProbePrefix is where the star proves, at start-up, that a bucket enforces
// conditional writes (shared/star.ProveConditionalWrites): it writes one
// object there and deletes it.
const ProbePrefix = "probes/"

// agentConfig returns the CloudWatch agent and Prometheus configuration
// (JSON and YAML documents) for one star.
func agentConfig(star, logGroup string) (cw, prom string) {
	type obj = map[string]any
	decl := func(dims [][]string, metric string) obj {
		return obj{
			"source_labels":    []string{"job"},
			"label_matcher":    "^strand$",
			"dimensions":       dims,
			"metric_selectors": []string{"^" + metric + "$"},
		}
	}
	doc := obj{"logs": obj{
		"force_flush_interval": 15,
		"metrics_collected": obj{"prometheus": obj{
			"prometheus_config_path": "env:PROMETHEUS_CONFIG_CONTENT",
			"log_group_name":         logGroup,
			"emf_processor": obj{
				"metric_namespace": MetricsNamespace,
				"metric_declaration": []obj{
					decl([][]string{{"star"}}, MetricBacklogAge),
					decl([][]string{{"cause"}, {"star", "cause"}}, MetricStalls),
				},
			},
		}},
	}}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("infra: agent config does not marshal: %v", err)) // static data: a bug
	}
	prom = fmt.Sprintf("global:\n  scrape_interval: 30s\n  scrape_timeout: 10s\n"+
		"scrape_configs:\n  - job_name: strand\n    static_configs:\n      - targets: ['localhost:%d']\n        labels:\n          star: %s\n",
		AdminPort, star)
	return string(b), prom
}

// ContextDeny are files no image may carry even where the Dockerfile
// copies a whole directory: API tokens the walkthrough writes, test
// binaries, and the CLI binary (`go build ./cmd/strand` in the root).
var ContextDeny = []string{"**/*.token", "**/*.test", "**/strand"}

// NewStarImage is the star's image asset: functions/star/Dockerfile built
// for linux/arm64 from a context that holds only what the Dockerfile
// copies (bundle.ContextSources) and the Dockerfile, less ContextDeny. So
// the asset hash, and with it the task definition, changes only when
// something the image is built from changes: a docs, test or tooling
// commit deploys no new star.
func NewStarImage(scope constructs.Construct, id, repoRoot string) (awsecrassets.DockerImageAsset, error) {
	f, err := os.Open(filepath.Join(repoRoot, StarDockerfile))
	if err != nil {
		return nil, fmt.Errorf("infra: star image: %w", err)
	}
	defer f.Close()
	stages, err := bundle.ParseDockerfile(f)
	if err != nil {
		return nil, fmt.Errorf("infra: star image %s: %w", StarDockerfile, err)
	}
	sources, err := bundle.ContextSources(stages)
	if err != nil {
		return nil, fmt.Errorf("infra: star image %s: %w", StarDockerfile, err)
	}
	return awsecrassets.NewDockerImageAsset(scope, jsii.String(id), &awsecrassets.DockerImageAssetProps{
		Directory:  jsii.String(repoRoot),
		File:       jsii.String(StarDockerfile),
		Platform:   awsecrassets.Platform_LINUX_ARM64(),
		IgnoreMode: awscdk.IgnoreMode_DOCKER,
		Exclude:    jsii.Strings(bundle.ContextExcludes(sources, StarDockerfile, ContextDeny)...),
	}), nil
}

// Star is the long-running tier: VPC (with S3, S3 Express and DynamoDB
// gateway endpoints), ECS cluster, one Fargate service per star and the
// Network Load Balancer in front of the API.
type Star struct {
	constructs.Construct
	Vpc           awsec2.Vpc
	Cluster       awsecs.Cluster
	TaskRole      awsiam.Role
	ExecutionRole awsiam.Role
	Services      []awsecs.FargateService
	LoadBalancer  elbv2.NetworkLoadBalancer
	Logs          awslogs.LogGroup
	MetricLogs    awslogs.LogGroup
	// StarSubnets[i] is the subnet star-i's task runs in when
	// Config.ZoneAligned (the Express zone cfg.StarZone(i)); nil otherwise.
	StarSubnets []awsec2.ISubnet
}

// NewStar creates the star tier. The image is built (at deploy time, not
// at synth) with functions/star/Dockerfile (NewStarImage).
func NewStar(scope constructs.Construct, id string, cfg Config, repoRoot string, st *Storage, ms *Metastore, se *Settlement) (*Star, error) {
	s := &Star{Construct: constructs.NewConstruct(scope, jsii.String(id))}

	subnets := []*awsec2.SubnetConfiguration{{
		Name: jsii.String("public"), SubnetType: awsec2.SubnetType_PUBLIC, CidrMask: jsii.Number(24),
	}}
	taskSubnets := awsec2.SubnetType_PUBLIC
	if cfg.NatGateways > 0 {
		subnets = append(subnets, &awsec2.SubnetConfiguration{
			Name: jsii.String("private"), SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS, CidrMask: jsii.Number(22),
		})
		taskSubnets = awsec2.SubnetType_PRIVATE_WITH_EGRESS
	}
	vpcProps := &awsec2.VpcProps{
		NatGateways:         jsii.Number(cfg.NatGateways),
		SubnetConfiguration: &subnets,
		// The default security group is used by nothing here; restricting
		// it would add a custom-resource Lambda.
		RestrictDefaultSecurityGroup: jsii.Bool(false),
		// Object and table traffic stays on the AWS network and skips the
		// NAT's per-GB charge.
		GatewayEndpoints: &map[string]*awsec2.GatewayVpcEndpointOptions{
			"S3":        {Service: awsec2.GatewayVpcEndpointAwsService_S3()},
			"S3Express": {Service: awsec2.GatewayVpcEndpointAwsService_S3_EXPRESS()},
			"DynamoDB":  {Service: awsec2.GatewayVpcEndpointAwsService_DYNAMODB()},
		},
	}
	if cfg.ZoneAligned() {
		// Exactly the Express set's zones, in its order: subnet group k
		// is in ExpressAZs[k]. (CDK refuses names the account's zone
		// lookup does not list.)
		vpcProps.AvailabilityZones = jsii.Strings(cfg.ExpressAZNames...)
	} else {
		// Without an account the CDK knows no zone names: 2 zones.
		vpcProps.MaxAzs = jsii.Number(3)
	}
	s.Vpc = awsec2.NewVpc(s.Construct, jsii.String("Vpc"), vpcProps)
	if cfg.FlowLogs {
		// All traffic (accepted and rejected) of the VPC, to the logs
		// bucket: no IAM role needed, unlike a CloudWatch Logs destination.
		s.Vpc.AddFlowLog(jsii.String("FlowLogs"), &awsec2.FlowLogOptions{
			Destination: awsec2.FlowLogDestination_ToS3(st.Logs, jsii.String(LogsPrefixFlow), nil),
			TrafficType: awsec2.FlowLogTrafficType_ALL,
		})
	}
	insights := awsecs.ContainerInsights_DISABLED
	if cfg.ContainerInsights {
		insights = awsecs.ContainerInsights_ENABLED
	}
	s.Cluster = awsecs.NewCluster(s.Construct, jsii.String("Cluster"), &awsecs.ClusterProps{Vpc: s.Vpc, ContainerInsightsV2: insights})

	s.Logs = awslogs.NewLogGroup(s.Construct, jsii.String("Logs"), &awslogs.LogGroupProps{RemovalPolicy: awscdk.RemovalPolicy_DESTROY})
	s.Logs.Node().DefaultChild().(awslogs.CfnLogGroup).SetRetentionInDays(jsii.Number(cfg.RetentionDays))

	s.TaskRole = awsiam.NewRole(s.Construct, jsii.String("TaskRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("ecs-tasks.amazonaws.com"), nil),
		Description: jsii.String("strand star task: least privilege"),
	})
	a := &access{}
	// Chains: the star writes slots (PutObject If-None-Match), reads them
	// back (ambiguous PUTs, fences, reads) and proves conditional writes
	// at start-up; ReadWrite sessions on the Express set.
	a.expressSession(st, false)
	a.objects(st.Chain.BucketArn(), "", true, "s3:GetObject", "s3:PutObject")
	// The start-up probe deletes its own object; nothing else of the chain
	// bucket is the star's to delete (trim and probe do that).
	a.objects(st.Chain.BucketArn(), ProbePrefix, false, "s3:DeleteObject")
	// Reads of settled data, and with the pass index of the window's
	// pass indexes and runs (reads and tail recovery).
	a.objects(st.Settled.BucketArn(), SettledPrefix, true, "s3:GetObject")
	if cfg.PassIndex { // and the packs that runs point into
		a.objects(st.Settled.BucketArn(), IndexPrefix, false, "s3:GetObject")
		a.objects(st.Settled.BucketArn(), PacksPrefix, false, "s3:GetObject")
	}
	a.table(ms, tableRead, tableWrite)
	a.allow([]string{"sqs:SendMessage"}, []*string{se.ReleaseQueue.QueueArn(), se.FenceQueue.QueueArn()}, nil)
	// The metrics sidecar writes embedded-metric-format logs to its group.
	s.MetricLogs = awslogs.NewLogGroup(s.Construct, jsii.String("MetricLogs"), &awslogs.LogGroupProps{RemovalPolicy: awscdk.RemovalPolicy_DESTROY})
	s.MetricLogs.Node().DefaultChild().(awslogs.CfnLogGroup).SetRetentionInDays(jsii.Number(cfg.RetentionDays))
	a.allow([]string{"logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"}, []*string{s.MetricLogs.LogGroupArn()}, nil)
	a.applyTo(s.TaskRole)
	// The star writes slots under chains/ and its start-up probe under
	// probes/ of the chain bucket: Get and Put on the whole bucket.
	suppress(s.TaskRole, objectKeys())
	s.ExecutionRole = awsiam.NewRole(s.Construct, jsii.String("ExecutionRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("ecs-tasks.amazonaws.com"), nil),
		Description: jsii.String("strand star task execution (image pull, logs)"),
	})

	image, err := NewStarImage(s.Construct, "Image", repoRoot)
	if err != nil {
		return nil, err
	}

	lbSubnets := taskSubnets
	if cfg.PublicAPI {
		lbSubnets = awsec2.SubnetType_PUBLIC
	}
	lbSG := awsec2.NewSecurityGroup(s.Construct, jsii.String("ApiSG"), &awsec2.SecurityGroupProps{
		Vpc: s.Vpc, Description: jsii.String("strand API load balancer"), AllowAllOutbound: jsii.Bool(false),
	})
	s.LoadBalancer = elbv2.NewNetworkLoadBalancer(s.Construct, jsii.String("Api"), &elbv2.NetworkLoadBalancerProps{
		Vpc:            s.Vpc,
		InternetFacing: jsii.Bool(cfg.PublicAPI),
		// A star runs in one zone; every LB node must reach it.
		CrossZoneEnabled: jsii.Bool(true),
		VpcSubnets:       &awsec2.SubnetSelection{SubnetType: lbSubnets},
		SecurityGroups:   &[]awsec2.ISecurityGroup{lbSG},
	})
	if cfg.NLBAccessLogs {
		// A Network Load Balancer logs TLS connections only: with TCP
		// listeners (no strand:certificateArn) the log stays empty.
		s.LoadBalancer.LogAccessLogs(st.Logs, jsii.String(LogsPrefixNLB))
	}
	clients := awsec2.Peer_Ipv4(s.Vpc.VpcCidrBlock())
	if cfg.PublicAPI {
		clients = awsec2.Peer_AnyIpv4()
		suppress(lbSG, nagException{rule: "AwsSolutions-EC23", reason: "strand:publicApi=true asks for an internet-facing API: " +
			"only the API ports are open, and without strand:certificateArn synthesis refuses it unless strand:allowPlaintextPublicApi says otherwise"})
	} else {
		suppress(lbSG, nagException{rule: "CdkNagValidationFailure", appliesTo: []string{`/^AwsSolutions-EC23$/`},
			reason: "the API ports are open to the VPC's CIDR only, a token cdk-nag cannot evaluate (internal load balancer)"})
	}
	if !cfg.NLBAccessLogs {
		suppress(s.LoadBalancer, switchedOff("AwsSolutions-ELB2", CtxNLBAccessLogs))
	}
	if !cfg.FlowLogs {
		suppress(s.Vpc, switchedOff("AwsSolutions-VPC7", CtxFlowLogs))
	}
	if !cfg.ContainerInsights {
		suppress(s.Cluster, switchedOff("AwsSolutions-ECS4", CtxContainerInsights))
	}
	taskSG := awsec2.NewSecurityGroup(s.Construct, jsii.String("TaskSG"), &awsec2.SecurityGroupProps{
		Vpc: s.Vpc, Description: jsii.String("strand star tasks"), AllowAllOutbound: jsii.Bool(true),
	})
	for _, port := range []int{APIPort, AdminPort} {
		taskSG.AddIngressRule(lbSG, awsec2.Port_Tcp(jsii.Number(port)), jsii.String(fmt.Sprintf("from the API load balancer, port %d", port)), nil)
		lbSG.AddEgressRule(taskSG, awsec2.Port_Tcp(jsii.Number(port)), jsii.String(fmt.Sprintf("to star tasks, port %d", port)), nil)
	}
	if cfg.Standby {
		// A standby relays its API connections to its star's leader, a
		// task in the same security group (ADR 0051).
		taskSG.AddIngressRule(taskSG, awsec2.Port_Tcp(jsii.Number(APIPort)), jsii.String("a standby relays the API to its star's leader"), nil)
	}
	health := &elbv2.HealthCheck{
		Protocol:                elbv2.Protocol_HTTP,
		Port:                    jsii.String(strconv.Itoa(AdminPort)),
		Path:                    jsii.String("/healthz"),
		Interval:                awscdk.Duration_Seconds(jsii.Number(10)),
		HealthyThresholdCount:   jsii.Number(2),
		UnhealthyThresholdCount: jsii.Number(3),
	}
	// preserveClientIP: the targets are the tasks' IPs (Fargate, awsvpc)
	// over TCP, for which an NLB passes its own address as the source
	// unless the target group's preserve_client_ip.enabled is set. The
	// star limits lookups of unknown tokens per source address (issue 18):
	// with the NLB's few addresses as sources, every client would share
	// them. The task security group admits the LB's security group, which
	// AWS honours with client IP preservation too; no star connects to the
	// API through the NLB (leader redirects go to the client), so the
	// hairpin that preservation forbids (a target reaching itself through
	// its NLB) does not arise.
	anyStar := s.LoadBalancer.AddListener(jsii.String("AnyStar"), listenerProps(cfg, APIPort))
	lbSG.AddIngressRule(clients, awsec2.Port_Tcp(jsii.Number(APIPort)), jsii.String("API, any star"), nil)
	var anyTargets, anyKafka []elbv2.INetworkLoadBalancerTarget
	// addTargets routes listener l to the targets' port.
	addTargets := func(l elbv2.NetworkListener, id string, port int, hc *elbv2.HealthCheck, targets *[]elbv2.INetworkLoadBalancerTarget) {
		l.AddTargets(jsii.String(id), &elbv2.AddNetworkTargetsProps{
			Port:                jsii.Number(port),
			Protocol:            elbv2.Protocol_TCP,
			Targets:             targets,
			HealthCheck:         hc,
			DeregistrationDelay: awscdk.Duration_Seconds(jsii.Number(30)),
			PreserveClientIp:    jsii.Bool(true), // see preserveClientIP
		})
	}
	// route opens listener id (lp) to svc's tasks alone, on port: the
	// address of one star; it returns the target for the shared listener.
	route := func(svc awsecs.FargateService, id string, port int, lp *elbv2.BaseNetworkListenerProps, hc *elbv2.HealthCheck, what string) elbv2.INetworkLoadBalancerTarget {
		target := svc.LoadBalancerTarget(&awsecs.LoadBalancerTargetOptions{
			ContainerName: jsii.String("star"), ContainerPort: jsii.Number(port),
		})
		l := s.LoadBalancer.AddListener(jsii.String(id), lp)
		lbSG.AddIngressRule(clients, awsec2.Port_Tcp(lp.Port), jsii.String(what), nil)
		addTargets(l, id+"Targets", port, hc, &[]elbv2.INetworkLoadBalancerTarget{target})
		return target
	}
	var anyKafkaListener elbv2.NetworkListener
	if cfg.Kafka {
		taskSG.AddIngressRule(lbSG, awsec2.Port_Tcp(jsii.Number(KafkaPort)), jsii.String(fmt.Sprintf("from the API load balancer, Kafka port %d", KafkaPort)), nil)
		lbSG.AddEgressRule(taskSG, awsec2.Port_Tcp(jsii.Number(KafkaPort)), jsii.String(fmt.Sprintf("to star tasks, Kafka port %d", KafkaPort)), nil)
		anyKafkaListener = s.LoadBalancer.AddListener(jsii.String("KafkaAnyStar"), kafkaListenerProps(cfg, KafkaPort))
		lbSG.AddIngressRule(clients, awsec2.Port_Tcp(jsii.Number(KafkaPort)), jsii.String("Kafka bootstrap, any star"), nil)
	}

	for i := range cfg.StarCount {
		star := StarID(i)
		td := awsecs.NewFargateTaskDefinition(s.Construct, jsii.String(fmt.Sprintf("Task%d", i)), &awsecs.FargateTaskDefinitionProps{
			Family:         jsii.String(*awscdk.Stack_Of(s.Construct).StackName() + "-" + star),
			Cpu:            jsii.Number(cfg.TaskCPU),
			MemoryLimitMiB: jsii.Number(cfg.TaskMemoryMiB),
			TaskRole:       s.TaskRole,
			ExecutionRole:  s.ExecutionRole,
			RuntimePlatform: &awsecs.RuntimePlatform{
				CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
				OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
			},
		})
		suppress(td, nagException{rule: "AwsSolutions-ECS2", reason: "the environment holds configuration only (resource names, queue URLs, sizes, " +
			"peers): no secret; API tokens live hashed in the table"})
		env := StarEnv(cfg, i, StarResources{
			Table:           ms.Table.TableName(),
			ExpressBuckets:  awscdk.Fn_Join(jsii.String(","), &st.ExpressNames),
			StandardBucket:  st.Chain.BucketName(),
			SettledBucket:   st.Settled.BucketName(),
			ReleaseQueueURL: se.ReleaseQueue.QueueUrl(),
			FenceQueueURL:   se.FenceQueue.QueueUrl(),
			Region:          awscdk.Aws_REGION(),
			APIHost:         s.APIHost(cfg),
		})
		ports := []*awsecs.PortMapping{
			{ContainerPort: jsii.Number(APIPort), Name: jsii.String("api")},
			{ContainerPort: jsii.Number(AdminPort), Name: jsii.String("admin")},
		}
		if cfg.Kafka {
			ports = append(ports, &awsecs.PortMapping{ContainerPort: jsii.Number(KafkaPort), Name: jsii.String("kafka")})
		}
		// The Go runtime's soft limit, under the container's hard one.
		env["GOMEMLIMIT"] = jsii.String(fmt.Sprintf("%dMiB", GoMemLimitMiB(cfg)))
		td.AddContainer(jsii.String("star"), &awsecs.ContainerDefinitionOptions{
			ContainerName: jsii.String("star"),
			Image:         awsecs.ContainerImage_FromDockerImageAsset(image),
			// The task's memory less the agent's: what BacklogMiB and
			// GOMEMLIMIT are computed from.
			MemoryLimitMiB: jsii.Number(StarContainerMiB(cfg)),
			// No command: the image's ENTRYPOINT is the star binary and
			// every flag comes from the environment (STRAND_<FLAG>).
			Environment:  &env,
			PortMappings: &ports,
			Logging: awsecs.LogDriver_AwsLogs(&awsecs.AwsLogDriverProps{
				LogGroup: s.Logs, StreamPrefix: jsii.String(star),
			}),
			// SIGTERM starts the star's drain (admitted batches acked,
			// sessions ended with unavailable), bounded by
			// STRAND_DRAIN_BUDGET; ECS kills the task StopMarginSeconds
			// after the budget.
			StopTimeout: awscdk.Duration_Seconds(jsii.Number(DrainBudgetSeconds + StopMarginSeconds)),
			Essential:   jsii.Bool(true),
		})
		cw, prom := agentConfig(star, *s.MetricLogs.LogGroupName())
		td.AddContainer(jsii.String("metrics"), &awsecs.ContainerDefinitionOptions{
			ContainerName: jsii.String("cloudwatch-agent"),
			Image:         awsecs.ContainerImage_FromRegistry(jsii.String(AgentImage), nil),
			// A hard limit: the agent cannot take the star's memory.
			MemoryLimitMiB: jsii.Number(AgentMemoryMiB),
			Essential:      jsii.Bool(false),
			Environment: &map[string]*string{
				"CW_CONFIG_CONTENT":         jsii.String(cw),
				"PROMETHEUS_CONFIG_CONTENT": jsii.String(prom),
			},
			Logging: awsecs.LogDriver_AwsLogs(&awsecs.AwsLogDriverProps{
				LogGroup: s.Logs, StreamPrefix: jsii.String(star + "-agent"),
			}),
		})
		taskPlacement := &awsec2.SubnetSelection{SubnetType: taskSubnets}
		if cfg.ZoneAligned() {
			// star-i in Express zone i mod K: of the W=2 copies an ack
			// waits for, one can be in the task's own zone. With a
			// standby, the service also has the next Express zone's
			// subnet, and ECS spreads a service's Fargate tasks evenly
			// over its subnets' zones: the two tasks run in different
			// zones (a zone's loss leaves one), each an Express zone,
			// and either may be the leader.
			own := &awsec2.SubnetSelection{SubnetType: taskSubnets, AvailabilityZones: jsii.Strings(cfg.ExpressAZNames[cfg.StarZone(i)])}
			var sel []awsec2.ISubnet
			if p := s.Vpc.SelectSubnets(own).Subnets; p != nil {
				sel = *p
			}
			if len(sel) != 1 {
				// A bug: the VPC has one subnet of this type per zone.
				panic(fmt.Sprintf("infra: %s: %d subnets in %s, want 1", star, len(sel), cfg.ExpressAZNames[cfg.StarZone(i)]))
			}
			s.StarSubnets = append(s.StarSubnets, sel[0])
			zones := []string{cfg.ExpressAZNames[cfg.StarZone(i)]}
			if cfg.Standby && cfg.StandbyZone(i) != cfg.StarZone(i) {
				zones = append(zones, cfg.ExpressAZNames[cfg.StandbyZone(i)])
			}
			taskPlacement.AvailabilityZones = jsii.Strings(zones...)
		}
		svc := awsecs.NewFargateService(s.Construct, jsii.String(fmt.Sprintf("Service%d", i)), &awsecs.FargateServiceProps{
			Cluster:        s.Cluster,
			ServiceName:    jsii.String(star),
			TaskDefinition: td,
			// With Standby: a leader and a standby (STRAND_STANDBY, ADR
			// 0051), both healthy to the load balancer (/healthz is
			// "ready"; the standby relays its API port to the leader).
			DesiredCount: jsii.Number(cfg.StarTasks()),
			// A deploy starts the new tasks before it stops the old ones,
			// so the service never has zero tasks. With Standby the new
			// tasks stand by (the lease is held) until ECS stops the old
			// ones: the old leader drains and releases the lease, and a
			// new task takes it at its next read (fence, walk, mint):
			// appends pause for the drain and the takeover, and clients
			// keep their endpoint (both tasks are targets). Without
			// Standby the new task takes the star over as it starts, the
			// old one finds its epoch fenced and sheds (its /healthz turns
			// 503), and appends pause until the load balancer routes to
			// the new task (docs/operations.md, "Failover on AWS"). Two
			// tasks of one star id are what the epoch fence arbitrates
			// either way ("Restarts and takeover").
			MinHealthyPercent:      jsii.Number(100),
			MaxHealthyPercent:      jsii.Number(200),
			CircuitBreaker:         &awsecs.DeploymentCircuitBreaker{Enable: jsii.Bool(true), Rollback: jsii.Bool(true)},
			AssignPublicIp:         jsii.Bool(cfg.NatGateways == 0),
			VpcSubnets:             taskPlacement,
			SecurityGroups:         &[]awsec2.ISecurityGroup{taskSG},
			HealthCheckGracePeriod: awscdk.Duration_Seconds(jsii.Number(120)),
			PlatformVersion:        awsecs.FargatePlatformVersion_LATEST,
		})
		port := StarListenerPort(i)
		anyTargets = append(anyTargets, route(svc, fmt.Sprintf("Star%d", i), APIPort, listenerProps(cfg, port), health, "API, "+star))
		if cfg.Kafka {
			kport := KafkaListenerPort(i)
			anyKafka = append(anyKafka, route(svc, fmt.Sprintf("KafkaStar%d", i), KafkaPort, kafkaListenerProps(cfg, kport), kafkaHealth(), "Kafka, "+star))
		}
		s.Services = append(s.Services, svc)
	}
	if cfg.Kafka {
		addTargets(anyKafkaListener, "KafkaAnyStarTargets", KafkaPort, kafkaHealth(), &anyKafka)
	}
	addTargets(anyStar, "AnyStarTargets", APIPort, health, &anyTargets)
	// After the task definitions: they add the pull and log grants (the
	// role's default policy), and a suppression covers only the children
	// that exist when it is made.
	suppress(s.ExecutionRole, nagException{
		rule: "AwsSolutions-IAM5", appliesTo: []string{`/^Resource::\*$/`},
		reason: "ecr:GetAuthorizationToken has no resource type, so it can only be granted on *; image pulls and logs are on named resources",
	})
	return s, nil
}

// APIHost is the host name clients reach the API by: Config.APIHostname
// when set, else the load balancer's DNS name.
func (s *Star) APIHost(cfg Config) *string {
	if cfg.APIHostname != "" {
		return jsii.String(cfg.APIHostname)
	}
	return s.LoadBalancer.LoadBalancerDnsName()
}

// APIScheme is the URL scheme of the API at the load balancer.
func APIScheme(cfg Config) string {
	if cfg.TLS() {
		return "https"
	}
	return "http"
}

// listenerProps is an API listener on port: TLS with the configured
// certificate when there is one (ALPN offers h2 first, for gRPC and
// Connect streaming, then HTTP/1.1), else TCP passthrough. Targets are
// plain TCP either way: the star speaks HTTP/1.1 and cleartext HTTP/2.
func listenerProps(cfg Config, port int) *elbv2.BaseNetworkListenerProps {
	p := &elbv2.BaseNetworkListenerProps{Port: jsii.Number(port), Protocol: elbv2.Protocol_TCP}
	if cfg.TLS() {
		p.Protocol = elbv2.Protocol_TLS
		p.Certificates = &[]elbv2.IListenerCertificate{elbv2.ListenerCertificate_FromArn(jsii.String(cfg.CertificateARN))}
		p.SslPolicy = elbv2.SslPolicy_RECOMMENDED_TLS
		p.AlpnPolicy = elbv2.AlpnPolicy_HTTP2_PREFERRED
	}
	return p
}

// kafkaListenerProps is a Kafka listener on port: TLS with the configured
// certificate (Config.Validate requires one with Kafka), no ALPN (Kafka
// clients offer none), to plain TCP targets.
func kafkaListenerProps(cfg Config, port int) *elbv2.BaseNetworkListenerProps {
	return &elbv2.BaseNetworkListenerProps{
		Port: jsii.Number(port), Protocol: elbv2.Protocol_TLS,
		Certificates: &[]elbv2.IListenerCertificate{elbv2.ListenerCertificate_FromArn(jsii.String(cfg.CertificateARN))},
		SslPolicy:    elbv2.SslPolicy_RECOMMENDED_TLS,
	}
}

// kafkaHealth is the Kafka target groups' health check: a TCP connect to
// the Kafka port itself, not /healthz. A standby task (ADR 0051) relays
// that port to its leader (lease.Task.Relay), so the check passes on both
// tasks: ECS replaces a task that fails any of its target groups' checks
// (docs/kafka.md, "On AWS").
func kafkaHealth() *elbv2.HealthCheck {
	return &elbv2.HealthCheck{
		Protocol:                elbv2.Protocol_TCP,
		Interval:                awscdk.Duration_Seconds(jsii.Number(5)),
		HealthyThresholdCount:   jsii.Number(2),
		UnhealthyThresholdCount: jsii.Number(2),
	}
}

// StarResources are the deployed names a star is configured with (tokens
// at synth).
type StarResources struct {
	Table, ExpressBuckets, StandardBucket, SettledBucket *string
	ReleaseQueueURL, FenceQueueURL                       *string
	Region                                               *string
	// APIHost is the API's host name (Star.APIHost): star j is reached on
	// its own listener port there (STRAND_PEERS).
	APIHost *string
}

// StarEnv is the environment of star i's container. functions/star reads
// DrainBudgetSeconds is the star's --drain-budget in the task (the star's
// own default, shared/node.DefaultDrainBudget: above the 10 s Standard
// commit deadline); StopMarginSeconds is how much longer ECS waits after
// SIGTERM before it kills the task (the HTTP shutdown and process exit).
const (
	DrainBudgetSeconds = 15
	StopMarginSeconds  = 10
)

// every flag from STRAND_<FLAG> (dashes to underscores, upper case), so
// this is its whole configuration; see `go run ./functions/star --help`.
func StarEnv(cfg Config, i int, r StarResources) map[string]*string {
	env := map[string]*string{
		"STRAND_STAR_ID":                      jsii.String(StarID(i)),
		"STRAND_REGION":                       r.Region,
		"STRAND_TABLE":                        r.Table,
		"STRAND_EXPRESS_BUCKETS":              r.ExpressBuckets,
		"STRAND_EXPRESS_W":                    jsii.String(strconv.Itoa(ExpressW)),
		"STRAND_STANDARD_BUCKET":              r.StandardBucket,
		"STRAND_SETTLED_BUCKET":               r.SettledBucket,
		"STRAND_RELEASE_QUEUE_URL":            r.ReleaseQueueURL,
		"STRAND_FENCE_QUEUE_URL":              r.FenceQueueURL,
		"STRAND_ADDR":                         jsii.String(fmt.Sprintf(":%d", APIPort)),
		"STRAND_ADMIN_ADDR":                   jsii.String(fmt.Sprintf(":%d", AdminPort)),
		"STRAND_S3_MEMORY_BUFFER_MIB":         jsii.String(strconv.Itoa(cfg.MemoryBufferMiB)),
		"STRAND_S3_EXPRESS_MEMORY_BUFFER_MIB": jsii.String(strconv.Itoa(cfg.ExpressMemoryBufferMiB)),
		"STRAND_S3_CHAIN_BACKLOG_MIB":         jsii.String(strconv.Itoa(BacklogMiB(cfg))),
		"STRAND_DRAIN_BUDGET":                 jsii.String(fmt.Sprintf("%ds", DrainBudgetSeconds)),
		// The leader relays nothing; a standby relays to the address the
		// leader advertises (its task's IPv4 address, found at start).
		"STRAND_STANDBY": jsii.String(strconv.FormatBool(cfg.Standby)),
		// The same switch as the Lambdas' (settlement.go): always set.
		EnvPassIndex: jsii.String(strconv.FormatBool(cfg.PassIndex)),
		// Counted in the memory plan (WindowMiB) with the pass index.
		EnvWindowCacheMiB: jsii.String(strconv.Itoa(cfg.WindowCacheMiB)),
		// Counted in the memory plan (DedupeMiB).
		"STRAND_DEDUPE_MAX_PRODUCERS": jsii.String(strconv.Itoa(cfg.DedupeMaxProducers)),
	}
	// Peers: every other star, through its own load balancer listener
	// (a call for a stream another star leads is answered with where that
	// leader is).
	if p := peerList(cfg, i, func(j int) []*string {
		return []*string{jsii.String(fmt.Sprintf("%s=%s://", StarID(j), APIScheme(cfg))), r.APIHost, jsii.String(fmt.Sprintf(":%d", StarListenerPort(j)))}
	}); p != nil {
		env["STRAND_PEERS"] = p
	}
	if cfg.Kafka {
		kafkaEnv(env, cfg, i, r.APIHost)
	}
	return env
}

// kafkaEnv sets star i's Kafka front end (Config.Kafka): it listens on
// KafkaPort and advertises its own load balancer listener, and names the
// other stars at theirs, so Metadata lists brokers a client reaches (the
// load balancer's host name, which the certificate covers).
func kafkaEnv(env map[string]*string, cfg Config, i int, host *string) {
	at := func(j int) []*string { return []*string{host, jsii.String(fmt.Sprintf(":%d", KafkaListenerPort(j)))} }
	env["STRAND_KAFKA_ADDR"] = jsii.String(fmt.Sprintf(":%d", KafkaPort))
	adv := at(i)
	env["STRAND_KAFKA_ADVERTISE"] = awscdk.Fn_Join(jsii.String(""), &adv)
	if p := peerList(cfg, i, func(j int) []*string { return append([]*string{jsii.String(StarID(j) + "=")}, at(j)...) }); p != nil {
		env["STRAND_KAFKA_PEERS"] = p
	}
}

// peerList joins entry(j) of every star j but i with commas (a --peers
// or --kafka-peers value); nil with one star.
func peerList(cfg Config, i int, entry func(j int) []*string) *string {
	var peers []*string
	for j := range cfg.StarCount {
		if j == i {
			continue
		}
		if len(peers) > 0 {
			peers = append(peers, jsii.String(","))
		}
		peers = append(peers, entry(j)...)
	}
	if len(peers) == 0 {
		return nil
	}
	return awscdk.Fn_Join(jsii.String(""), &peers)
}
