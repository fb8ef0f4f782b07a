package stack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Strand is the whole deployment, one construct per concern.
type Strand struct {
	awscdk.Stack
	Config     Config
	Storage    *Storage
	Metastore  *Metastore
	Settlement *Settlement
	Star       *Star
	Operations *Operations
}

// NewStrand builds the stack. repoRoot is the repository checkout (assets:
// infra/build/<fn>, the star's Dockerfile).
func NewStrand(scope constructs.Construct, id string, cfg Config, repoRoot string) (*Strand, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	env := &awscdk.Environment{Region: jsii.String(cfg.Region)}
	if cfg.Account != "" {
		env.Account = jsii.String(cfg.Account)
	}
	s := &Strand{Config: cfg}
	s.Stack = awscdk.NewStack(scope, jsii.String(id), &awscdk.StackProps{
		Env:         env,
		Description: jsii.String("strand: durable ordered streams on S3 Express One Zone, S3 and DynamoDB"),
	})
	// S3 server access logs are delivered by bucket policy, not the
	// LogDeliveryWrite ACL, which ACL-less buckets (BucketOwnerEnforced)
	// refuse. Set on the stack, before any child, so every bucket sees it.
	s.Stack.Node().SetContext(jsii.String("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"), true)
	// VPC flow logs to S3: the CDK writes the log delivery service's
	// grant into the logs bucket's policy itself. Without it AWS adds that
	// statement when the flow log is created, and the next update that
	// writes the bucket policy (CloudFormation replaces it whole) drops it:
	// flow logs stop being delivered, silently.
	s.Stack.Node().SetContext(jsii.String("@aws-cdk/aws-s3:createDefaultLoggingPolicy"), true)
	// Cost allocation tag on everything that takes tags (these two types
	// do not, per the CloudFormation schema cfn-lint checks against).
	awscdk.Tags_Of(s.Stack).Add(jsii.String("app"), jsii.String("strand"), &awscdk.TagProps{
		ExcludeResourceTypes: jsii.Strings("AWS::ElasticLoadBalancingV2::Listener", "AWS::CloudWatch::Dashboard"),
	})
	s.Storage = NewStorage(s.Stack, "Storage", cfg)
	s.Metastore = NewMetastore(s.Stack, "Metastore", cfg)
	var err error
	s.Settlement, err = NewSettlement(s.Stack, "Settlement", cfg, repoRoot, s.Storage, s.Metastore)
	if err != nil {
		return nil, err
	}
	s.Star, err = NewStar(s.Stack, "Star", cfg, repoRoot, s.Storage, s.Metastore, s.Settlement)
	if err != nil {
		return nil, err
	}
	s.Operations = NewOperations(s.Stack, "Operations", cfg, s.Settlement, s.Star)

	out := func(id string, v *string, desc string) {
		awscdk.NewCfnOutput(s.Stack, jsii.String(id), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
	}
	out("ApiEndpoint", s.Star.LoadBalancer.LoadBalancerDnsName(),
		fmt.Sprintf("API load balancer: port %d reaches any star, port %d+i only star-i", APIPort, APIPort+1))
	out("ApiUrl", awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String(APIScheme(cfg) + "://"), s.Star.APIHost(cfg), jsii.String(fmt.Sprintf(":%d", APIPort)),
	}), apiURLDescription(cfg))
	placement := zonePlacement(cfg)
	out("ZonePlacement", jsii.String(placement), "where the star tasks run relative to the Express set (docs/deploy.md, Zone placement)")
	if !cfg.ZoneAligned() {
		awscdk.Annotations_Of(s.Stack).AddWarningV2(jsii.String("strand:zonePlacement"), jsii.String(placement), nil)
	}
	for i, sn := range s.Star.StarSubnets {
		// The zone id CloudFormation reports for the subnet: it must be
		// the Express zone the names were given for, else the names do
		// not belong to this account.
		if cs, ok := sn.Node().FindChild(jsii.String("Subnet")).(awsec2.CfnSubnet); ok {
			want := cfg.ExpressAZs[cfg.StarZone(i)]
			out(fmt.Sprintf("Star%dZoneId", i), cs.AttrAvailabilityZoneId(),
				fmt.Sprintf("zone id of %s's subnet: must be %s (else %s does not match this account)", StarID(i), want, CtxExpressAZNames))
		}
	}
	out("TableName", s.Metastore.Table.TableName(), "metastore table")
	out("ExpressBuckets", awscdk.Fn_Join(jsii.String(","), &s.Storage.ExpressNames), "Express set (directory buckets)")
	out("StandardBucket", s.Storage.Chain.BucketName(), "Standard chain bucket")
	out("SettledBucket", s.Storage.Settled.BucketName(), "settled bucket")
	if s.Storage.Logs != nil {
		out("LogsBucket", s.Storage.Logs.BucketName(), "access and flow logs (expire after strand:retentionDays)")
	}
	out("ReleaseQueueUrl", s.Settlement.ReleaseQueue.QueueUrl(), "release queue (FIFO)")
	out("AlarmTopicArn", s.Operations.Topic.TopicArn(), "alarm notifications")
	return s, nil
}

// apiURLDescription describes the ApiUrl output.
func apiURLDescription(cfg Config) string {
	if cfg.TLS() {
		return fmt.Sprintf("API over TLS (point %s at ApiEndpoint); port %d+i reaches only star-i", cfg.APIHostname, APIPort+1)
	}
	return fmt.Sprintf("API in clear text (no %s); port %d+i reaches only star-i", CtxCertificateARN, APIPort+1)
}

// zonePlacement says where star tasks run relative to the Express set.
func zonePlacement(cfg Config) string {
	if !cfg.ZoneAligned() {
		return fmt.Sprintf("not aligned: star tasks run in whatever zones the VPC has, not necessarily in an Express zone (%s), "+
			"so an ack may wait on two cross-zone copies; set %s and %s (docs/deploy.md, Zone placement)",
			strings.Join(cfg.ExpressAZs, ","), CtxAccount, CtxExpressAZNames)
	}
	parts := make([]string, 0, cfg.StarCount)
	for i := range cfg.StarCount {
		z := cfg.StarZone(i)
		parts = append(parts, fmt.Sprintf("%s in %s (%s)", StarID(i), cfg.ExpressAZNames[z], cfg.ExpressAZs[z]))
	}
	return "aligned: " + strings.Join(parts, ", ")
}

// ErrNoRepoRoot is returned when no ancestor directory holds infra/go.mod.
var ErrNoRepoRoot = errors.New("infra: repository root not found")

// FindRepoRoot walks up from dir to the directory that holds infra/go.mod.
func FindRepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "infra", "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%w above %s", ErrNoRepoRoot, dir)
		}
	}
}

// SetupEnv sets, unless already set, the environment the jsii runtime
// reads: its package cache under infra/.cache (not the home folder) and
// the silenced end-of-life warning for the machine's Node 20. Call it
// before the first CDK call.
func SetupEnv(repoRoot string) error {
	defaults := map[string]string{
		"JSII_RUNTIME_PACKAGE_CACHE_ROOT":               filepath.Join(repoRoot, "infra", ".cache", "jsii"),
		"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
		"JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION":    "1",
	}
	for k, v := range defaults {
		if os.Getenv(k) != "" {
			continue
		}
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("set %s: %w", k, err)
		}
	}
	return nil
}
